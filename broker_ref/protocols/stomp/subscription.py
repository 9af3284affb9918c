"""One STOMP subscription's ack bookkeeping and credit window.

Client-acknowledged subscriptions keep their unacknowledged deliveries in delivery order
(a dict keeps insertion order), because ``ack:client`` is cumulative: acknowledging one
message acknowledges every earlier unacknowledged message of the subscription.

The credit rule is jmspy's own (``top_up`` of the prefetch twins, the rule the jmspy
client applies to itself): the server tops a STOMP consumer up exactly as the jmspy client
would top up itself (Open MQ: refill to ``limit`` once unconsumed falls to ``limit *
threshold%``). Who counts what, so that no number is kept twice:

* The credit granted and not yet used is the broker core's (its consumer's ``credit``,
  read through ``ServerConnection.credit``): this object keeps no copy of it, and the
  session (:mod:`.credit`) reports grants to the core, never to a counter of its own.
* ``unconsumed`` (delivered as MESSAGE frames, not yet ACKed, NACKed or committed by the
  STOMP client) is the protocol's own view, which the core cannot own: on an
  at-most-once queue the core settles each message when it is sent, and in a
  transaction the core holds acknowledged messages the client has already let go, so
  only the session knows what its client still holds.

How the session (:mod:`.protocol`) applies the rule, and why:

* ``ack:client`` / ``client-individual``: the Open MQ rule over ``unconsumed`` and the
  core's unused credit, so a STOMP consumer is topped up as a jmspy client tops up
  itself (seed 004). The window is ``jmspy-flow-limit`` / ``jmspy-flow-threshold`` (percent,
  default 50) when given; else ``activemq.prefetchSize`` with threshold 100 (ActiveMQ keeps
  the window full); else ``prefetch-count`` (RabbitMQ; 0 = no limit); else Artemis's
  ``consumer-window-size`` in *bytes* (see below); else 1000/100. The destination's
  ``consumerFlowLimit`` wins when lower. A limit of 0 means 1: STOMP has no pull request.
* ``consumer-window-size: N`` (Artemis) bounds the bytes of MESSAGE frames sent and not yet
  acknowledged, as Artemis counts its consumer credits: a message is sent while fewer than
  N bytes are unacknowledged, so the window overshoots by at most one message and a message
  larger than the window still gets through, alone. ``-1`` means no window; ``0`` (which
  would never send) is served as one message at a time. The message credit given to the
  core is one at a time, refilled after each write and each acknowledgement.
* ``jmspy-connection-flow-limit`` on CONNECT caps the sum over the connection's
  client-acknowledged subscriptions: see :mod:`.credit`.
* ``jmspy-backlog`` asks an AMPS-style queue for a per-subscription backlog; the broker
  grants the lower of it and the queue's ``max_per_subscription_backlog`` (default 1).
* On an at-most-once queue the core settles each message when it is sent; a client-mode
  ACK then only reopens the window and a NACK cannot requeue (the message is gone).
* ``ack:auto``: the core acknowledges on delivery (``auto_ack``); the window is refilled
  when the host takes the frames in ``StompSession.data_to_send``, i.e. when written.
* While the host says its socket is congested (``StompSession.pause_credit``) no credit is
  granted; what would have been granted is owed and paid on ``resume_credit``. So a client
  that stops reading holds at most one window per subscription, never an unbounded queue.
"""

from __future__ import annotations

from typing import Final

from jmspy import twins
from jmspy.stomp_frames import Frame

from ...core.windows import ClientWindow
from .mapping import header_int

__all__ = ["AUTO", "CLIENT", "DEFAULT_LIMIT", "INDIVIDUAL", "MAX_LIMIT", "Subscription"]

AUTO: Final = "auto"
CLIENT: Final = "client"
INDIVIDUAL: Final = "client-individual"
DEFAULT_LIMIT: Final = 1000
MAX_LIMIT: Final = 2**31 - 1  #: largest window a header may ask for
_MAX: Final = MAX_LIMIT

_top_up = twins.prefetch.top_up


def _header_int(frame: Frame, name: str, low: int, high: int) -> int | None:
    raw = frame.header(name)
    return None if raw is None else header_int(name, raw, low, high)


class Subscription:
    """State of one SUBSCRIBE: ids, ack mode, unacked deliveries, credit window."""

    __slots__ = (
        "_byte_window",
        "_bytes",
        "_limit",
        "_sizes",
        "_threshold",
        "_unconsumed",
        "_window",
        "ack_mode",
        "asked",
        "asked_by",
        "broker_settles",
        "budget",
        "by_message_id",
        "closed",
        "consumer_id",
        "durable_name",
        "id",
        "owed",
        "unacked",
        "unwritten",
    )

    def __init__(
        self, sid: str, ack_mode: str, limit: int, threshold: int, durable_name: str | None,
        byte_window: int | None = None, asked_by: str = "default",
    ) -> None:
        self.id = sid
        self.ack_mode = ack_mode
        self.durable_name = durable_name
        self._limit = limit
        self._threshold = threshold
        #: the window the client asked for (before the destination's limit), and the
        #: header it came from (the management API shows both: core/windows.py)
        self.asked = limit
        self.asked_by = asked_by
        #: the Open MQ window applies (client modes, once attached to the core consumer)
        self._window = False
        #: delivered as MESSAGE frames and not yet ACKed/NACKed/committed (client modes)
        self._unconsumed = 0
        #: consumer-window-size (bytes), when that is the window; else None
        self._byte_window = byte_window if ack_mode != AUTO else None
        self._bytes = 0  # bytes of MESSAGE frames delivered and not yet acked (byte window)
        self._sizes: dict[int, int] = {}  # delivery tag -> its frame's bytes (byte window)
        self.consumer_id = 0
        self.closed = False
        #: delivery tag -> message id, oldest first (client modes)
        self.unacked: dict[int, str] = {}
        self.by_message_id: dict[str, int] = {}
        self.unwritten = 0  # auto mode: delivered, not yet taken by the host
        self.owed = 0  # auto mode: credit withheld while the socket is congested
        #: the queue is at-most-once: the core settled each message when it was sent, so
        #: client ACKs/NACKs only move this subscription's window (nothing to settle)
        self.broker_settles = False
        #: deliveries the subscription may still be given credit for (``jmspy-max-messages``;
        #: None: no end)
        self.budget: int | None = None

    @classmethod
    def from_headers(
        cls, sid: str, ack_mode: str, frame: Frame, durable_name: str | None
    ) -> Subscription:
        """Window from ``jmspy-flow-limit``/``-threshold``; else a peer's prefetch header,
        kept full as that peer does: ``activemq.prefetchSize`` (ActiveMQ; 0 means pull,
        served as 1), ``prefetch-count`` (RabbitMQ; 0 means no limit) or
        ``consumer-window-size`` (Artemis; bytes, -1 means no limit)."""
        asked_by = "jmspy-flow-limit"
        limit = _header_int(frame, asked_by, 0, _MAX)
        threshold = _header_int(frame, "jmspy-flow-threshold", 0, 100)
        byte_window: int | None = None
        if limit is None:
            asked_by = "activemq.prefetchSize"
            limit = _header_int(frame, asked_by, 0, _MAX)
            if limit is None:
                asked_by = "prefetch-count"
                limit = _header_int(frame, asked_by, 0, _MAX)
                if limit == 0:
                    limit = _MAX
            if limit is None:
                asked_by = "consumer-window-size"
                window = _header_int(frame, asked_by, -1, _MAX)
                if window is not None:
                    limit = _MAX
                    byte_window = None if window == -1 else max(window, 1)
            if threshold is None:
                threshold = 100  # the peers keep the prefetch window full
        if limit is None:
            limit, asked_by = DEFAULT_LIMIT, "default"
        return cls(sid, ack_mode, max(limit, 1), 50 if threshold is None else threshold,
                   durable_name, byte_window, asked_by)

    @property
    def limit(self) -> int:
        return self._limit

    def start(self, consumer_id: int, destination_limit: int | None) -> None:
        """Attach to the core consumer; the destination's consumerFlowLimit wins if lower."""
        self.consumer_id = consumer_id
        if destination_limit is not None:
            self._limit = max(1, min(self._limit, destination_limit))
        self._window = self.ack_mode != AUTO

    def client_window(self) -> ClientWindow:
        """The window as its client asked for it, with what the client holds now."""
        return ClientWindow(self.asked, None if self._byte_window is not None
                            else self._threshold, self._unconsumed, self.asked_by)

    @property
    def byte_window(self) -> int | None:
        """Artemis's ``consumer-window-size`` in bytes, when that is this window."""
        return self._byte_window

    @property
    def unconsumed(self) -> int:
        """Deliveries the STOMP client holds unconsumed (client modes)."""
        return self._unconsumed

    def initial_credit(self) -> int:
        """Auto mode's first credit: the whole window (client modes ask :meth:`wanted`)."""
        return self._limit

    def wanted(self, credit: int) -> int:
        """Credit to give the core now (client modes), ``credit`` being the core's unused
        credit for this subscription: the Open MQ top-up, or for a byte window one more
        message while the unacknowledged bytes are under it."""
        if not self._window or self.closed:
            return 0
        if self._byte_window is None:
            return _top_up(self._limit, self._threshold, self._unconsumed, credit)
        free = (credit == 0 and self._bytes < self._byte_window
                and self._unconsumed < self._limit)
        return 1 if free else 0

    def capped(self, credit: int) -> int:
        """Of ``credit`` about to be granted, what the budget allows (and spends)."""
        budget = self.budget
        if budget is None:
            return credit
        credit = min(credit, budget)
        self.budget = budget - credit
        return credit

    def delivered(self, tag: int, message_id: str, size: int) -> None:
        """Delivery ``tag`` was written as a MESSAGE frame of ``size`` bytes (client
        modes; the core has already taken the credit it used)."""
        self._unconsumed += 1
        self.unacked[tag] = message_id
        self.by_message_id[message_id] = tag
        if self._byte_window is not None:
            self._sizes[tag] = size
            self._bytes += size

    def consumed(self, n: int) -> None:
        """``n`` deliveries left the consumer (acked, committed, nacked)."""
        if self._window and n > 0:
            if n > self._unconsumed:
                raise ValueError(
                    f"consumed({n}) but only {self._unconsumed} delivered items are "
                    "unconsumed")
            self._unconsumed -= n

    def take(self, tag: int) -> list[int]:
        """Remove and return the tags an ACK/NACK of ``tag`` covers (cumulative in
        ``client`` mode)."""
        unacked = self.unacked
        if self.ack_mode != CLIENT:
            tags = [tag]
        else:
            tags = []
            for t in unacked:
                tags.append(t)
                if t == tag:
                    break
        return self._taken(tags)

    def take_range(self, first: int, last: int) -> list[int]:
        """Remove and return every unacked tag from ``first`` to ``last`` (both in)."""
        return self._taken([t for t in self.unacked if first <= t <= last])

    def _taken(self, tags: list[int]) -> list[int]:
        unacked = self.unacked
        for t in tags:
            self.by_message_id.pop(unacked.pop(t), None)
        if self._byte_window is not None:
            sizes = self._sizes
            self._bytes -= sum(sizes.pop(t) for t in tags)
        return tags

    def drop_unacked(self) -> list[int]:
        """The consumer closed (its deliveries went back to the queue): forget them."""
        tags = list(self.unacked)
        self.unacked.clear()
        self.by_message_id.clear()
        self._sizes.clear()
        self._bytes = 0
        return tags
