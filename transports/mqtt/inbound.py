"""The receiving half of the mqtt:// transport: routing PUBLISH packets to consumers, the
per-consumer stash that enforces the Open MQ window, and PUBACKs in receipt order.

:class:`Inbound` owns the receiving state of one transport: its subscriptions and
consumers, the delivery tags, the PUBLISH records awaiting PUBACK and the backlog of a
persistent session; it reaches the transport only through :class:`InboundHost`. It runs
under the transport's lock, on paho's network thread (``on_message``) or on the
application thread that acks, grants or cancels; the TransportListener calls made here
only buffer (see the transport's module docstring).

Acknowledgement. paho sends no PUBACK on its own: this transport sends it when the jmspy
core says a message is *consumed* (``ack``). MQTT requires PUBACKs in the order the
PUBLISH packets arrived on the connection, so acks the application gives out of order
(INDIVIDUAL_ACKNOWLEDGE, or several consumers on one connection) are held until every
earlier message is acknowledged too; a message that is never acknowledged therefore
holds up the PUBACKs of later ones (and, with Receive Maximum, further deliveries).

Redelivery. MQTT has no NACK: ``cancel`` (recover, rollback of a listener failure) hands
the same message to the consumer again from the client's copy, still unacknowledged at
the broker, counted as redelivered. Only a persistent session (a client id) gets
unacknowledged messages redelivered by the broker, when it reconnects (DUP flag ->
JMSRedelivered).
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from jmspy import errors
from jmspy.capabilities import Feature, RefusedFeatureException
from jmspy.destinations import Destination, Topic
from jmspy.message import Message, selector_getter
from jmspy.transport import ConsumerSpec, TransportListener

from .mapping import filters_overlap, from_publish, strip_share, topic_of

try:
    from paho.mqtt.client import topic_matches_sub as _topic_matches_sub
except ImportError:  # pragma: no cover - the transport reports the missing package
    _topic_matches_sub = None  # type: ignore[assignment]

__all__ = ["Inbound", "InboundHost", "MqttConsumer", "MqttSubscription"]


@dataclass(eq=False)
class _Publish:
    """One inbound QoS>0 PUBLISH awaiting its PUBACK (``copies`` consumers still hold it)."""

    mid: int
    qos: int
    copies: int = 0
    done: bool = False
    ordered: bool = True  # still in the connection's receipt-order list


@dataclass(eq=False)
class MqttConsumer:
    """One jmspy consumer: its stash (deliveries beyond the core's credit) and what it
    holds unacknowledged (tag -> record, message, delivery count). The credit itself is
    the core's flow accounting's (``TransportListener.credit``), never counted here:
    ``paused`` only says the core took it back (or the connection dropped with it) and
    has not granted since."""

    spec: ConsumerSpec
    topic_filter: str
    selector: Any = None
    paused: bool = False
    stash: deque[tuple[int, Message, int]] = field(default_factory=deque)
    held: dict[int, tuple[_Publish | None, Message, int]] = field(default_factory=dict)
    selector_dropped: int = 0


@dataclass(eq=False)
class MqttSubscription:
    """One MQTT subscription; consumers with the same filter on a connection share it
    (MQTT replaces a subscription to the same filter instead of adding one)."""

    topic_filter: str
    sub_id: int
    queue: bool
    consumers: list[MqttConsumer] = field(default_factory=list)
    turn: int = 0
    durable_name: str | None = None


class InboundHost(Protocol):
    """What :class:`Inbound` asks of the transport."""

    @property
    def listener(self) -> TransportListener | None: ...

    @property
    def paho(self) -> Any:
        """The live paho client, or None while there is none (PUBACKs then die)."""

    @property
    def persistent_session(self) -> bool: ...

    @property
    def where(self) -> str: ...

    def refusal(self, feature: Feature, detail: str = "") -> RefusedFeatureException: ...


class Inbound:
    """Deliveries, credit, acknowledgement and redelivery of one transport."""

    def __init__(self, host: InboundHost, lock: threading.RLock) -> None:
        self._host = host
        self._lock = lock  # the transport's: subscribing and closing share it
        self._consumers: dict[int, MqttConsumer] = {}
        self._subs: dict[str, MqttSubscription] = {}
        self._by_sub_id: dict[int, MqttSubscription] = {}
        self._sub_ids = itertools.count(1)
        # Tags keep increasing across reconnects: the core treats every tag up to the
        # last one handed out before a drop as dead.
        self._tags = itertools.count(1)
        self._tag_owner: dict[int, MqttConsumer] = {}
        self._inbound: OrderedDict[int, _Publish] = OrderedDict()  # receipt order
        self._seq = itertools.count(1)
        self._orphans: list[tuple[Any, _Publish | None]] = []
        self._in_flight = 0
        self._in_flight_max = 0
        self._held_acks_max = 0

    # -- subscriptions ----------------------------------------------------------------------
    def subscription(self, topic_filter: str) -> MqttSubscription | None:
        with self._lock:
            return self._subs.get(topic_filter)

    def overlapping(self, topic_filter: str) -> str | None:
        """A subscribed filter that ``topic_filter`` overlaps, if any."""
        with self._lock:
            return next((f for f in self._subs if filters_overlap(f, topic_filter)), None)

    def new_subscription(self, topic_filter: str, queue: bool) -> MqttSubscription:
        """A subscription with the next Subscription Identifier (not yet attached)."""
        return MqttSubscription(topic_filter, next(self._sub_ids), queue)

    def subscriptions(self) -> list[MqttSubscription]:
        with self._lock:
            return list(self._subs.values())

    def attach(self, sub: MqttSubscription, consumer: MqttConsumer) -> None:
        """``consumer`` receives through ``sub`` (whose SUBSCRIBE the broker confirmed);
        the backlog of a persistent session that matches it is handed over."""
        with self._lock:
            self._subs[sub.topic_filter] = sub
            self._by_sub_id[sub.sub_id] = sub
            sub.consumers.append(consumer)
            self._consumers[consumer.spec.consumer_id] = consumer
            self._adopt_orphans()

    def detach(self, consumer_id: int) -> str | None:
        """Close a consumer: what it holds goes to another local consumer of the queue,
        is set aside for the broker's redelivery (a persistent session), or is finished.
        Returns the filter to UNSUBSCRIBE when its last consumer went (and it is not a
        durable subscription's)."""
        unsubscribe: str | None = None
        with self._lock:
            consumer = self._consumers.pop(consumer_id, None)
            if consumer is None:
                return None
            sub = self._subs[consumer.topic_filter]
            sub.consumers.remove(consumer)
            leftovers = list(consumer.held.items())
            consumer.held.clear()
            consumer.stash.clear()
            for tag, (rec, message, count) in leftovers:
                self._tag_owner.pop(tag, None)
                if sub.queue and sub.consumers:
                    # Another local consumer of the queue takes it over (a new tag).
                    if rec is not None:
                        rec.copies -= 1
                    self._hand(sub.consumers[0], rec, message, count)
                    if rec is not None and rec.copies == 0:
                        self._copy_done(rec, count=False)
                elif rec is not None and self._host.persistent_session and (
                        sub.queue or sub.durable_name):
                    self._set_aside(rec)  # the broker redelivers it to the next session
                else:
                    self._copy_done(rec)  # a closed subscription's copy: nothing keeps it
            if not sub.consumers:
                del self._subs[sub.topic_filter]
                self._by_sub_id.pop(sub.sub_id, None)
                if sub.durable_name is None:
                    unsubscribe = sub.topic_filter
            self._flush_acks()
        return unsubscribe

    def connection_lost(self) -> None:
        """Every tag and PUBACK owed on the dropped connection is dead."""
        with self._lock:
            for consumer in self._consumers.values():
                consumer.stash.clear()
                consumer.held.clear()
                consumer.paused = True  # the credit died too: wait for the core's grant
            self._tag_owner.clear()
            self._inbound.clear()
            self._orphans.clear()
            self._in_flight = 0

    def flow_counters(self) -> dict[str, int]:
        with self._lock:
            return {"in_flight": self._in_flight, "in_flight_max": self._in_flight_max,
                    "held_acks_max": self._held_acks_max, "orphans": len(self._orphans)}

    def consumer_state(self, consumer_id: int) -> dict[str, int]:
        with self._lock:
            consumer = self._consumers.get(consumer_id)
            if consumer is None:
                return {}
            return {
                "unacked": len(consumer.held),
                "stashed": len(consumer.stash),
                "paused": int(consumer.paused),
                "selector_dropped": consumer.selector_dropped,
            }

    # -- credit -------------------------------------------------------------------------------
    def grant_credit(self, consumer_id: int, credits: int) -> None:
        """No wire traffic: MQTT has no per-subscription credit (see module docstring).
        ``credits`` are in the core's accounting already, which :meth:`_release` asks."""
        with self._lock:
            consumer = self._consumers.get(consumer_id)
            if consumer is not None:
                consumer.paused = False
                self._release(consumer)

    def revoke_credit(self, consumer_id: int) -> int:
        with self._lock:
            consumer = self._consumers.get(consumer_id)
            if consumer is None:
                return 0
            # The broker cannot take it back: all of it returns to the core, and what
            # arrives meanwhile waits in the stash until the core grants again.
            consumer.paused = True
            listener = self._host.listener
            return 0 if listener is None else listener.credit(consumer_id)

    def _release(self, consumer: MqttConsumer) -> None:
        # Lock held. Hand stashed deliveries over while the core's credit allows: read
        # once, since each hand-over uses one in the core's own count.
        listener = self._host.listener
        if listener is None or consumer.paused or not consumer.stash:
            return
        auto = False
        stash = consumer.stash
        for _ in range(min(len(stash), listener.credit(consumer.spec.consumer_id))):
            tag, message, count = stash.popleft()
            if consumer.spec.auto_ack:
                self._ack_tag(tag)
                auto = True
            listener.on_delivery(consumer.spec.consumer_id, tag, message, count)
        if auto:
            self._flush_acks()

    # -- receiving (paho's network thread) ------------------------------------------------
    def on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self._lock:
            rec: _Publish | None = None
            if msg.qos > 0:
                rec = _Publish(msg.mid, msg.qos)
                self._inbound[next(self._seq)] = rec
                self._in_flight += 1
                self._in_flight_max = max(self._in_flight_max, self._in_flight)
            targets = self._route(msg)
            if not targets:
                if self._host.persistent_session:
                    # A persistent session's backlog arrives before the application
                    # re-creates its consumers: keep it for them (unacknowledged).
                    self._orphans.append((msg, rec))
                    if rec is not None:
                        self._set_aside(rec)
                else:
                    self._copy_done(rec, count=False)
                self._flush_acks()
                return
            for consumer in targets:
                try:
                    message = self._convert(msg, consumer)
                except Exception as exc:  # an unreadable packet must not kill the loop
                    self._report(
                        errors.MessageFormatException(
                            f"unreadable MQTT PUBLISH on {msg.topic!r} from "
                            f"{self._host.where}: {exc}"
                        )
                    )
                    continue
                self._hand(consumer, rec, message, 2 if msg.dup else 1)
            if rec is not None and rec.copies == 0:
                self._copy_done(rec, count=False)  # every copy filtered out
            self._flush_acks()

    def _route(self, msg: Any) -> list[MqttConsumer]:
        # Lock held. MQTT 5 names the matching subscriptions; 3.1.1 is matched locally.
        ids = None
        if msg.properties is not None:
            ids = getattr(msg.properties, "SubscriptionIdentifier", None)
        if ids:
            subs = [self._by_sub_id[i] for i in ids if i in self._by_sub_id]
        else:
            subs = [
                s
                for s in self._subs.values()
                if _topic_matches_sub(strip_share(s.topic_filter), msg.topic)
            ]
        targets: list[MqttConsumer] = []
        for sub in subs:
            if not sub.consumers:
                continue
            if sub.queue:
                sub.turn = (sub.turn + 1) % len(sub.consumers)
                targets.append(sub.consumers[sub.turn])
            else:
                targets.extend(sub.consumers)
        return targets

    def _convert(self, msg: Any, consumer: MqttConsumer) -> Message:
        dest: Destination = consumer.spec.destination
        if isinstance(dest, Topic):
            dest = topic_of(msg.topic)
        return from_publish(msg.topic, msg.payload, msg.qos, msg.properties, dest)

    def _hand(
        self, consumer: MqttConsumer, rec: _Publish | None, message: Message, count: int
    ) -> None:
        # Lock held: one copy of a PUBLISH for one consumer (selector applied here).
        selector = consumer.selector
        if selector is not None and not selector.matches(selector_getter(message)):
            consumer.selector_dropped += 1
            return
        tag = next(self._tags)
        if rec is not None:
            rec.copies += 1
        consumer.held[tag] = (rec, message, count)
        self._tag_owner[tag] = consumer
        consumer.stash.append((tag, message, count))
        self._release(consumer)

    def _adopt_orphans(self) -> None:
        # Lock held: a consumer appeared; give it the backlog that matches it.
        orphans, self._orphans = self._orphans, []
        for msg, rec in orphans:
            targets = self._route(msg)
            if not targets:
                self._orphans.append((msg, rec))
                continue
            for consumer in targets:
                self._hand(consumer, rec, self._convert(msg, consumer), 2 if msg.dup else 1)
            if rec is not None and rec.copies == 0:
                self._copy_done(rec, count=False)

    def _report(self, error: errors.JMSException) -> None:
        listener = self._host.listener
        if listener is not None:
            listener.on_transport_error(error)

    # -- acknowledgement ------------------------------------------------------------------
    def _set_aside(self, rec: _Publish) -> None:
        """Take a record out of the ordering: it is kept for a later consumer or for the
        broker's redelivery, and must not hold up the PUBACKs of later messages."""
        rec.ordered = False

    def _copy_done(self, rec: _Publish | None, count: bool = True) -> None:
        # Lock held. One consumer is finished with its copy of ``rec``.
        if rec is None:
            return
        if count and rec.copies > 0:
            rec.copies -= 1
        if rec.copies == 0:
            rec.done = True
            if not rec.ordered:
                self._puback(rec)

    def _puback(self, rec: _Publish) -> None:
        self._in_flight -= 1
        client = self._host.paho
        if client is not None:
            client.ack(rec.mid, rec.qos)

    def _flush_acks(self) -> None:
        # Lock held: PUBACK, in receipt order, every finished record at the head.
        inbound = self._inbound
        while inbound:
            seq, rec = next(iter(inbound.items()))
            if not rec.ordered:
                del inbound[seq]  # _copy_done PUBACKs it when it is finished
                continue
            if not rec.done:
                break
            del inbound[seq]
            self._puback(rec)
        held = len(inbound)
        if held > self._held_acks_max:
            self._held_acks_max = held

    def _ack_tag(self, tag: int) -> None:
        consumer = self._tag_owner.pop(tag, None)
        if consumer is None:
            return
        entry = consumer.held.pop(tag, None)
        if entry is not None:
            self._copy_done(entry[0])

    def ack(self, delivery_tags: list[int], tx: str | None = None) -> None:
        if tx is not None:
            raise self._host.refusal(Feature.TRANSACTIONS)
        with self._lock:
            for tag in delivery_tags:
                self._ack_tag(tag)
            self._flush_acks()

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True) -> None:
        """Give deliveries to their consumer again, from our copy: MQTT has no NACK, and
        the broker still holds them unacknowledged. They go to the head of the stash, in
        the order given (the core cancels younger prefetched messages first, then older
        ones the application saw, so this restores delivery order)."""
        with self._lock:
            per_consumer: dict[int, list[tuple[int, Message, int]]] = {}
            for tag in delivery_tags:
                consumer = self._tag_owner.get(tag)
                if consumer is None:
                    continue
                rec, message, count = consumer.held[tag]
                if redelivered:
                    count += 1
                    consumer.held[tag] = (rec, message, count)
                per_consumer.setdefault(consumer.spec.consumer_id, []).append(
                    (tag, copy.copy(message), count)
                )
            for consumer_id, items in per_consumer.items():
                consumer = self._consumers[consumer_id]
                consumer.stash.extendleft(reversed(items))
                self._release(consumer)
