"""One consumer's STOMP subscription, client side: what the broker sent and the core has not
settled yet.

The core runs the Open MQ window and grants credit (``grant_credit``); a broker with only a
prefetch (or none) may send more than that. Deliveries beyond the credit wait in the
*stash*, in arrival order, and are handed to the core as credit comes (:meth:`release`).
How many may go is the core's to say: its flow accounting (the consumer's prefetch
buffer, read through ``TransportListener.credit``) is the one owner of the window, and
this object keeps no credit count of its own; ``paused`` only says that the core took
its credit back and has not granted since.
``unacked`` maps each delivery tag to the broker's ack id, in delivery order: what an ACK or
a hand-back names. ``fence`` and ``copies`` belong to redelivery (:mod:`.redelivery`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jmspy.capabilities import Feature
from jmspy.destinations import Queue, Topic
from jmspy.message import Message
from jmspy.transport import ConsumerSpec
from jmspy.wire.headers import DESTINATION_FLOW_LIMIT

from .. import destination_options
from .mapping import BrokerProfile, profile_key

__all__ = ["ARTEMIS_BYTES_PER_MESSAGE", "RABBIT_DURABLE", "StompSubscription", "StreamCopies"]

#: hand(tag, message, delivery count): give one delivery to the core
Hand = Callable[[int, Message, int], None]
#: Artemis counts its window in bytes: a jmspy window of N messages asks for N KiB
ARTEMIS_BYTES_PER_MESSAGE = 1024
#: RabbitMQ's durable topic subscription (its STOMP docs): SUBSCRIBE with these creates
#: it, UNSUBSCRIBE with them deletes it (``persistent`` is the older alias of durable)
RABBIT_DURABLE = {"durable": "true", "auto-delete": "false", "persistent": "true"}


class StreamCopies(dict[int, tuple[dict[str, str], bytes]]):
    """A RabbitMQ stream subscription's copies of its unacknowledged deliveries (see
    ``StompSubscription.copies``), which also remember the highest stream offset
    delivered: RabbitMQ stamps each MESSAGE with ``x-stream-offset``. After a dropped
    connection the subscription resumes from the oldest unacknowledged message, or just
    past the newest delivered one, instead of its first ``x-stream-offset`` again (with
    ``first``, the whole stream once more)."""

    high = -1

    def __setitem__(self, tag: int, frame: tuple[dict[str, str], bytes]) -> None:
        offset = frame[0].get("x-stream-offset", "")
        if offset.isdigit() and int(offset) > self.high:
            self.high = int(offset)
        super().__setitem__(tag, frame)

    def resume_offset(self) -> int | None:
        """Where to read from after a reconnect (None: nothing was delivered yet)."""
        unacked = [int(o) for h, _ in self.values()
                   if (o := h.get("x-stream-offset", "")).isdigit()]
        if unacked:
            return min(unacked)
        return self.high + 1 if self.high >= 0 else None


@dataclass(eq=False)
class StompSubscription:
    """Transport-side state of one consumer (one STOMP subscription at a time)."""

    spec: ConsumerSpec
    sub_id: str
    headers: dict[str, str]
    #: revoke_credit took the core's credit back, or the connection dropped with it:
    #: nothing is handed over until the core grants again (it revokes in its own
    #: accounting after the transport's lock is released, so its count lags until then)
    paused: bool = False
    stash: deque[tuple[int, Message, int]] = field(default_factory=deque)
    unacked: dict[int, str] = field(default_factory=dict)  # tag -> ack id, delivery order
    pending_cancel: set[int] = field(default_factory=set)
    #: those of ``pending_cancel`` the application never saw (cancelled unmarked)
    pending_unseen: set[int] = field(default_factory=set)
    in_flight_max: int = 0  # most deliveries ever unacked at once (what the broker sent)
    selector_dropped: int = 0
    client_selector: Any = None
    #: set by a hand-back (see Redelivery.nack) until the first redelivery for it arrives
    fence: bool = False
    #: the count keys of what the fenced hand-backs returned: one arriving again lifts the
    #: fence as a ``redelivered:true`` does (a broker returns unseen ones unmarked)
    fenced: set[str] = field(default_factory=set)
    #: tag -> (headers, body) of each unacked delivery, kept only where recover() must
    #: redeliver from the client's copy (ActiveMQ non-durable topic subscriptions)
    copies: dict[int, tuple[dict[str, str], bytes]] | None = None
    #: the destination option ``consumer.prefetchSize`` (None: not given): the core's
    #: window is the lower of it and the client's limit
    destination_flow_limit: int | None = None
    #: a RabbitMQ stream (``x-queue-type=stream``): never NACKed (see for_spec)
    stream: bool = False

    @classmethod
    def for_spec(
        cls, spec: ConsumerSpec, p: BrokerProfile, require: Callable[[Feature, str], None],
        durable_queue: Callable[[str], str], *, discard_queue_selectors: bool,
    ) -> StompSubscription:
        """The subscription for ``spec``, with the SUBSCRIBE headers broker ``p`` needs
        (not yet sent); ``require`` refuses what the broker cannot carry, and
        ``durable_queue`` names RabbitMQ's queue behind a durable subscription."""
        headers: dict[str, str] = {}
        client_selector = None
        if spec.shared:
            require(Feature.SHARED_SUBSCRIPTIONS, "")
            assert spec.subscription_name is not None
            headers[p.shared_header + ("-durable" if spec.durable else "") + "-subscription"
                    ] = spec.subscription_name
        elif spec.durable:
            require(Feature.DURABLE_SUBSCRIPTIONS, "")
            assert spec.subscription_name is not None
            if p.durable_header == "durable":  # RabbitMQ
                headers.update(RABBIT_DURABLE)
                headers["x-queue-name"] = durable_queue(spec.subscription_name)
            else:
                headers[p.durable_header] = spec.subscription_name
        if spec.no_local:
            require(Feature.NO_LOCAL, "")
            headers[p.no_local_header] = "true"
        if spec.selector:
            if p.server_selectors:
                headers["selector"] = spec.selector
            else:
                if isinstance(spec.destination, Queue) and not discard_queue_selectors:
                    require(Feature.QUEUE_SELECTORS, "a selector on a queue")
                from jmspy.selector import compile_selector

                client_selector = compile_selector(spec.selector)
        options = destination_options.resolve(
            "stomp", profile_key(p), spec.destination, where=p.server or "unknown server")
        headers.update(options.subscribe_headers)
        flow = spec.flow_limit  # the lower of the client's and the destination's limit
        if options.flow_limit is not None and options.flow_limit < flow:
            flow = options.flow_limit
        limit = max(1, flow)
        if p.window == "jmspy-flow-limit":
            headers["jmspy-flow-limit"] = str(flow)
            headers["jmspy-flow-threshold"] = str(spec.flow_threshold)
        elif p.window_in_bytes:
            headers[p.window] = str(limit * ARTEMIS_BYTES_PER_MESSAGE)
        elif p.window:
            headers[p.window] = str(limit)
        sub = cls(spec, "", headers, client_selector=client_selector,
                  destination_flow_limit=options.flow_limit)
        if p.cancel == "resubscribe" and isinstance(spec.destination, Topic) and not spec.durable:
            # A re-SUBSCRIBE would make a new topic subscription, and the old one's
            # unacked messages die with it: recover() redelivers from the client's copy.
            sub.copies = {}
        elif options.subscribe_headers.get("x-queue-type") == "stream":
            # A RabbitMQ stream takes no NACK (it closes the connection) and loses nothing
            # by being read: recover() and rollback redeliver from the client's copy, and
            # the broker's deliveries stay unacked (holding prefetch slots) until the
            # redelivered messages are acknowledged.
            sub.copies = StreamCopies()
            sub.stream = True
        return sub

    def destination_limit(self, receipt: dict[str, str]) -> int | None:
        """The destination's consumer flow limit: the lower of the URL's destination
        option and the one the broker sent on the SUBSCRIBE's RECEIPT (``receipt``: its
        headers; jmspy broker sends its destination's ``consumer-flow-limit`` there).
        None when neither names one. A value that is not a whole number is ignored: the
        broker enforces its own limit either way, and this only reports it."""
        limits = [self.destination_flow_limit] if self.destination_flow_limit is not None else []
        echoed = receipt.get(DESTINATION_FLOW_LIMIT, "")
        if echoed.isdigit():
            limits.append(int(echoed))
        return min(limits) if limits else None

    def count_key(self, message_key: str) -> str:
        """What JMSXDeliveryCount is remembered under. A queue message is one message
        wherever it goes on this connection, so its count follows it from consumer to
        consumer. Each topic subscription gets its own copy under the same message id, so
        there the count is the subscription's: recover() in one session must not raise
        what another subscription's copy says."""
        spec = self.spec
        if isinstance(spec.destination, Queue):
            return message_key
        return f"{spec.subscription_name or spec.consumer_id}\x00{message_key}"

    def received(self, tag: int, ack_id: str) -> None:
        """The broker delivered ``tag`` (not yet acknowledged)."""
        unacked = self.unacked
        unacked[tag] = ack_id
        if len(unacked) > self.in_flight_max:
            self.in_flight_max = len(unacked)

    def release(self, hand: Hand, credit: int) -> None:
        """Hand stashed deliveries over, oldest first: at most ``credit``, the core's
        unused credit (each hand-over uses one of it in the core's own accounting, so it
        is read once per call, not once per delivery), none while ``paused``."""
        if self.paused:
            return
        stash = self.stash
        n = min(credit, len(stash))
        for _ in range(n):
            tag, message, count = stash.popleft()
            hand(tag, message, count)

    def take_credit(self, credit: int) -> int:
        """The core takes its unused credit (``credit``) back. A prefetch broker cannot
        give it back: it all returns to the core, and whatever the broker still sends
        waits in the stash until the core grants again."""
        self.paused = True
        return credit

    def connection_lost(self) -> None:
        """Every tag of the dropped connection is dead (the broker redelivers them), and
        credit went with it."""
        if isinstance(self.copies, StreamCopies):
            resume = self.copies.resume_offset()
            if resume is not None:
                self.headers["x-stream-offset"] = f"offset={resume}"
        self.unacked.clear()
        self.stash.clear()
        self.pending_cancel.clear()
        self.pending_unseen.clear()
        self.paused = True  # what the core granted died too: wait for its new grant
        self.lift_fence()  # the broker redelivers everything after a reconnect

    def unseen_tags(self) -> set[int]:
        """Unacked deliveries the application never saw: the stash, and those the core
        cancelled unmarked (prefetched in its buffer)."""
        return self.pending_unseen | {t for t, _, _ in self.stash}

    def seen_through(self) -> str | None:
        """For an UNSUBSCRIBE (``jmspy-seen-through``): the ack id of the last unacked
        delivery the application was given, "0" for none; None where ack ids are not
        numbers (STOMP 1.0/1.1 acks by message id). The app is given each subscription's
        deliveries in arrival order, so everything after it is unseen."""
        unseen = self.unseen_tags()
        last = "0"
        for tag, ack_id in self.unacked.items():
            if not ack_id.isdigit():
                return None
            if tag not in unseen:
                last = ack_id
        return last

    def lifts_fence(self, key: str | None, redelivered: bool) -> bool:
        """Whether an arrival ends the fence (see Redelivery.nack): a redelivery, or one of
        the messages the fenced hand-back returned."""
        return redelivered or (key is not None and key in self.fenced)

    def lift_fence(self) -> None:
        self.fence = False
        self.fenced.clear()

    def state(self) -> dict[str, int]:
        """Counters for tests and troubleshooting (the credit is the core's: see
        ``MessageConsumer.flow_stats``)."""
        return {
            "unacked": len(self.unacked),
            "stashed": len(self.stash),
            "paused": int(self.paused),
            "in_flight_max": self.in_flight_max,
            "selector_dropped": self.selector_dropped,
        }
