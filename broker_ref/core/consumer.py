"""Per-delivery records shared by queues and connections, as the running twin makes them.

The records are defined in :mod:`.records` (pure twin) and ``cython_ext/records.pyx``
(compiled twin, typed fields); this module hands out the chosen one, so every record the
broker makes is one the compiled dispatch loop can read as C fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy.broker_ref.core import twins

from .api import AddressSettings
from .records import DELIVERING, GONE, PAGE_OVERHEAD, PRIORITIES, READY, SCHEDULED

if TYPE_CHECKING:
    from .records import (
        ConnectionRecord,
        DeliveryChannel,
        FlowRecord,
        Level,
        LevelsRecord,
        MessageRef,
        PageBudget,
        QueueRecord,
        ServerConsumer,
    )
else:
    _records = twins.records
    ConnectionRecord = _records.ConnectionRecord
    DeliveryChannel = _records.DeliveryChannel
    FlowRecord = _records.FlowRecord
    Level = _records.Level
    LevelsRecord = _records.LevelsRecord
    MessageRef = _records.MessageRef
    PageBudget = _records.PageBudget
    QueueRecord = _records.QueueRecord
    ServerConsumer = _records.ServerConsumer

__all__ = [
    "DELIVERING",
    "GONE",
    "PAGE_OVERHEAD",
    "PRIORITIES",
    "READY",
    "SCHEDULED",
    "ConnectionRecord",
    "DeliveryChannel",
    "FlowRecord",
    "Level",
    "LevelsRecord",
    "MessageRef",
    "PageBudget",
    "QueueRecord",
    "ServerConsumer",
    "effective_flow_limit",
]


def effective_flow_limit(settings: AddressSettings) -> int | None:
    """A destination limit below 1 would starve every consumer; treat it as 1 (pull)."""
    limit = settings.consumer_flow_limit
    return None if limit is None else max(1, limit)
