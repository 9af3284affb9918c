"""Open MQ's connection flow limit as a rule: how a connection's free capacity is shared.

``imqConnectionFlowLimit`` caps what one connection may hold across all its consumers:
every delivered-but-unconsumed message *plus* every credit a broker may still use (it can
send against that credit at any moment). When a consumer's own window asks for more than
the connection has free, it gets what is free and is remembered as *starved*; the next
time capacity frees up, starved consumers are served first, oldest first. Without that,
the consumer that happens to consume would take back every slot it freed and a second
consumer on the same connection could wait forever.

The client (:class:`jmspy.flow.ConnectionFlow`) uses this rule where the broker knows
nothing of the limit. Where it does (``vm://``, and ``stomp://`` to jmspy broker), the
broker gates deliveries on the connection instead
(:class:`jmspy.broker_ref.core.flow_gate.ConnectionGate`), which needs no credit held back
for anyone. The class only counts; callers hold their own locks and do their own I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

__all__ = ["FlowCap", "Share"]

K = TypeVar("K")  # a consumer, used as a dict key


class Share(NamedTuple, Generic[K]):
    """One consumer's part of a :meth:`FlowCap.share`: what its window asked for and what
    the connection could give (``granted < wanted`` means the cap cut it short)."""

    key: K
    wanted: int
    granted: int


class FlowCap(Generic[K]):
    """The connection-wide cap over consumers identified by hashable keys."""

    __slots__ = ("_starved", "limit")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"connection flow limit must be >= 1, got {limit}")
        self.limit = limit
        self._starved: dict[K, None] = {}  # insertion order = who waited first

    @property
    def starved(self) -> list[K]:
        """Consumers cut short and not yet fed, oldest first."""
        return list(self._starved)

    def share(self, committed: int, asking: K | None,
              wanted: Callable[[K], int]) -> list[Share[K]]:
        """Share ``limit - committed`` among the starved consumers, then ``asking``.

        ``committed`` is what the connection holds now (unconsumed plus outstanding credit
        over all its consumers); ``wanted(key)`` is what that consumer's own window asks
        for. Returns a :class:`Share` for every consumer that wanted something; the caller
        grants each ``granted`` (and sends it to the broker core or the wire).
        """
        available = self.limit - committed
        order = [k for k in self._starved if k != asking]
        if asking is not None:
            order.append(asking)
        shares: list[Share[K]] = []
        for key in order:
            want = wanted(key)
            if want <= 0:
                self._starved.pop(key, None)
                continue
            grant = max(0, min(want, available))
            available -= grant
            if grant < want:
                self._starved.setdefault(key, None)
            else:
                self._starved.pop(key, None)
            shares.append(Share(key, want, grant))
        return shares

    def forget(self, key: K) -> None:
        """The consumer closed: it waits for nothing any more."""
        self._starved.pop(key, None)
