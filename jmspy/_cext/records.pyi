"""Stub for the compiled twin built from cython_ext/records.pyx: the same classes as
:mod:`jmspy.broker_ref.core.records` (the pure twin), with typed fields."""

from jmspy.broker_ref.core.records import (
    ConnectionRecord,
    DeliveryChannel,
    FlowRecord,
    Level,
    LevelsRecord,
    MessageRef,
    PageBudget,
    QueueRecord,
    ServerConsumer,
    ServerMessage,
)

__all__ = ["ConnectionRecord", "DeliveryChannel", "FlowRecord", "Level", "LevelsRecord",
           "MessageRef", "PageBudget", "QueueRecord", "ServerConsumer", "ServerMessage"]
