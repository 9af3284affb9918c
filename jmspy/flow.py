"""Client flow control: Open MQ's consumer window and the connection-wide cap.

Each consumer owns a :class:`PrefetchBuffer` (compiled, with a pure twin) that does the
per-message accounting: how many messages are delivered and unconsumed, how much credit
the broker still holds, and when the threshold says to ask for another batch. This module
adds what spans consumers: ``imqConnectionFlowLimit``, which caps the sum of every
consumer's unconsumed messages *plus* the credit they have outstanding, so the broker can
never push the connection past the cap.

Where the broker enforces the connection cap itself (``Transport.broker_connection_flow``:
vm://, whose core gates deliveries the way Open MQ's broker does, and stomp:// to jmspy
broker), the client only asks each consumer's own window and, for vm://, tells the broker
how many messages left its buffers (``Transport.release_flow``).

Lock order (never the other way round): ``ConnectionFlow.lock`` -> a consumer's lock.
No lock is held while calling the transport: a ``vm`` grant delivers synchronously into
consumer buffers, which take consumer locks.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from . import twins
from .flow_cap import FlowCap
from .logs import client_logger
from .prefetch_protocol import PrefetchBufferProtocol

#: The window's decisions: a credit grant (a refill at the threshold), a top-up the
#: connection cap holds back. Once per batch of messages, never per message.
log = client_logger("flow")

if TYPE_CHECKING:
    from .transport import Transport

__all__ = ["ConnectionFlow", "FlowStats", "FlowedConsumer", "new_prefetch_buffer"]

_prefetch = twins.prefetch


def new_prefetch_buffer(limit: int, threshold: int) -> PrefetchBufferProtocol:
    """A prefetch buffer from the selected twin (compiled unless JMSPY_PUREPYTHON=1)."""
    buffer: PrefetchBufferProtocol = _prefetch.PrefetchBuffer(limit, threshold)
    return buffer


@dataclass(frozen=True, slots=True)
class FlowStats:
    """A snapshot of one consumer's flow control, for users to see it working.

    ``limited_by`` says which side set ``limit``: "client" (imqConsumerFlowLimit),
    "destination" (the broker's consumerFlowLimit, when lower) or "pull" (limit 0).
    ``connection_capped`` counts top-ups the connection-wide limit cut short.
    """

    limit: int
    threshold: int
    limited_by: str
    client_limit: int
    destination_limit: int | None
    buffered: int
    unconsumed: int
    outstanding_credit: int
    delivered: int
    consumed: int
    batches_requested: int
    pauses: int
    connection_capped: int


class FlowedConsumer(Protocol):
    """What ConnectionFlow needs from a consumer."""

    consumer_id: int
    _lock: threading.Lock
    _buffer: PrefetchBufferProtocol
    _connection_capped: int


class ConnectionFlow:
    """The connection-level cap (imqConnectionFlowLimit) over all its consumers."""

    def __init__(self, transport: Transport, enabled: bool, limit: int) -> None:
        self.transport = transport
        self.enabled = enabled
        self.limit = limit
        self.lock = threading.Lock()
        self._consumers: dict[int, FlowedConsumer] = {}
        #: who gets the free capacity where the broker knows no limit (FlowCap's rule);
        #: a disabled cap still exists, so the flow stats never need a None check
        self._cap: FlowCap[FlowedConsumer] = FlowCap(max(1, limit))
        #: per consumer id: how many of its deliveries the broker was told left the
        #: buffers (Transport.release_flow); a consumer's own lock guards its entry
        self._released: dict[int, int] = {}

    def add(self, consumer: FlowedConsumer) -> None:
        with self.lock:
            self._consumers[consumer.consumer_id] = consumer

    def remove(self, consumer: FlowedConsumer) -> None:
        with self.lock:
            self._consumers.pop(consumer.consumer_id, None)
            self._cap.forget(consumer)
        if self.enabled:
            release = self.transport.release_flow
            if release is not None:  # a closed consumer holds nothing any more
                with consumer._lock:
                    told = self._released.pop(consumer.consumer_id, 0)
                    left = consumer._buffer.delivered_total - told
                if left > 0:
                    release(left)
            self.top_up(None)  # its capacity is free now: feed whoever waited

    def buffered_total(self) -> int:
        """Messages held unconsumed across the connection (what the cap bounds)."""
        total = 0
        for consumer in list(self._consumers.values()):
            with consumer._lock:
                total += consumer._buffer.unconsumed
        return total

    def _committed(self) -> int:
        # Caller holds self.lock. Unconsumed messages plus credit the broker may still use.
        total = 0
        for consumer in self._consumers.values():
            with consumer._lock:
                buf = consumer._buffer
                total += buf.unconsumed + buf.outstanding
        return total

    def _wanted(self, consumer: FlowedConsumer) -> int:
        # Caller holds self.lock. A closed consumer wants nothing. A consumer's want only
        # grows between this read and the grant (consuming raises it, a delivery moves
        # credit into unconsumed), and that consumer calls top_up itself afterwards: a
        # stale read never over-grants.
        if consumer.consumer_id not in self._consumers:
            return 0
        with consumer._lock:
            return int(consumer._buffer.wanted())

    def top_up(self, consumer: FlowedConsumer | None) -> None:
        """Grant what ``consumer`` (and any starved consumer) should have now.

        Without the connection cap, or when the broker enforces it (stomp:// to jmspy
        broker: one owner of the decision, never two that could disagree), this is just
        the consumer's own threshold rule.
        """
        grants: list[tuple[int, int]] = []
        if not self.enabled or self.transport.broker_connection_flow:
            if consumer is None:
                return
            release = self.transport.release_flow if self.enabled else None
            released = 0
            with consumer._lock:
                buf = consumer._buffer
                want = buf.wanted()
                if want > 0:
                    buf.granted(want)
                if release is not None and consumer.consumer_id in self._consumers:
                    gone = buf.delivered_total - buf.unconsumed  # consumed or handed back
                    released = gone - self._released.get(consumer.consumer_id, 0)
                    self._released[consumer.consumer_id] = gone
            capped = self.enabled and want > 0 and self.buffered_total() >= self.limit
            if capped:
                with consumer._lock:  # the broker holds this top-up back for now
                    consumer._connection_capped += 1
            if released > 0 and release is not None:
                release(released)
            if want > 0:
                log.debug("consumer %d: window refilled, %d credit granted%s",
                          consumer.consumer_id, want,
                          " (the broker holds it: connection flow limit reached)"
                          if capped else "")
                self.transport.grant_credit(consumer.consumer_id, want)
            return
        with self.lock:
            shares = self._cap.share(self._committed(), consumer, self._wanted)
            for share in shares:
                cand = share.key
                with cand._lock:
                    if share.granted > 0:
                        cand._buffer.granted(share.granted)
                        grants.append((cand.consumer_id, share.granted))
                    if share.granted < share.wanted:
                        cand._connection_capped += 1
                        log.debug("consumer %d: paused at the connection flow limit "
                                  "(%d of %d credit wanted granted)", cand.consumer_id,
                                  share.granted, share.wanted)
        for consumer_id, grant in grants:
            log.debug("consumer %d: window refilled, %d credit granted", consumer_id, grant)
            self.transport.grant_credit(consumer_id, grant)
