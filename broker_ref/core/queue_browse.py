"""What a queue browser sees: the queue's messages in delivery order, without taking any.

A browse reads the ready levels in RAM and, level by level, what the queue has paged out
(seed 002), through their owners' reading methods; it skips messages whose expiry time
has passed (the queue expires them when dispatch or a timer reaches them, not here) and
those the browser's selector refuses. Under an AMPS ``TargetQueueDepth`` (seed 001) only
the active messages are visible: the caller passes how many (``QueuePolicy.active_budget``).
Messages in delivery and scheduled ones are not on the queue, so a browser never sees
them.
"""

from __future__ import annotations

from .api import ServerMessage
from .consumer import PRIORITIES
from .filters import Filter, filter_accepts
from .queue_paging import QueuePaging
from .ready_levels import ReadyLevels

__all__ = ["browse"]


def browse(levels: ReadyLevels, paging: QueuePaging | None, active: int, flt: Filter | None,
           now: int) -> list[ServerMessage]:
    """The messages of ``levels`` and ``paging`` a browser with selector ``flt`` sees at
    ``now``, highest priority first; ``active``: how many ready messages in RAM are
    visible (-1: all)."""
    out: list[ServerMessage] = []
    for i in range(PRIORITIES):
        for ref in levels.ready_at(i):
            if active >= 0:
                if active == 0:
                    return out
                active -= 1
            m = ref.message
            if m.expiration and m.expiration <= now:
                continue
            if flt is None or filter_accepts(flt, m):
                out.append(m)
        if paging is not None:
            for m in paging.browse(i):
                if (not m.expiration or m.expiration > now) and (
                        flt is None or filter_accepts(flt, m)):
                    out.append(m)
    return out
