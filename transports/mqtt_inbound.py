"""The receiving half of the mqtt:// transport: routing PUBLISH packets to consumers, the
per-consumer stash that enforces the Open MQ window, and PUBACKs in receipt order.

Split from mqtt.py for size; :class:`Inbound` is a mixin whose state MqttTransport's
``__init__`` creates. Everything here runs with ``self._lock`` held, on paho's network
thread (``_on_message``) or on the application thread that acks, grants or cancels; the
TransportListener calls made here only buffer (see mqtt.py's module docstring).
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jmspy import errors
from jmspy.capabilities import Feature, RefusedFeatureException
from jmspy.destinations import Destination, Topic
from jmspy.message import Message, selector_getter
from jmspy.transport import ConsumerSpec, TransportListener

from .capabilities import refusal, require
from .mqtt_mapping import from_publish, strip_share, topic_of

try:
    from paho.mqtt.client import topic_matches_sub as _topic_matches_sub
except ImportError:  # pragma: no cover - mqtt.py reports the missing package
    _topic_matches_sub = None  # type: ignore[assignment]

__all__ = ["Inbound"]


@dataclass(eq=False)
class _Publish:
    """One inbound QoS>0 PUBLISH awaiting its PUBACK (``copies`` consumers still hold it)."""

    mid: int
    qos: int
    copies: int = 0
    done: bool = False
    ordered: bool = True  # still in the connection's receipt-order list


@dataclass(eq=False)
class _Consumer:
    spec: ConsumerSpec
    topic_filter: str
    selector: Any = None
    credit: int = 0
    stash: deque[tuple[int, Message, int]] = field(default_factory=deque)
    held: dict[int, tuple[_Publish | None, Message, int]] = field(default_factory=dict)
    selector_dropped: int = 0


@dataclass(eq=False)
class _Subscription:
    """One MQTT subscription; consumers with the same filter on a connection share it
    (MQTT replaces a subscription to the same filter instead of adding one)."""

    topic_filter: str
    sub_id: int
    queue: bool
    consumers: list[_Consumer] = field(default_factory=list)
    turn: int = 0
    durable_name: str | None = None


class Inbound:
    """Deliveries, credit, acknowledgement and redelivery (mixed into MqttTransport)."""

    _lock: threading.RLock
    _listener: TransportListener | None
    _client: Any
    persistent_session: bool
    host: str
    port: int
    version: str
    _consumers: dict[int, _Consumer]
    _subs: dict[str, _Subscription]
    _by_sub_id: dict[int, _Subscription]
    _tags: Iterator[int]
    _tag_owner: dict[int, _Consumer]
    _inbound: OrderedDict[int, _Publish]
    _seq: Iterator[int]
    _orphans: list[tuple[Any, _Publish | None]]
    _in_flight: int
    _in_flight_max: int
    _held_acks_max: int

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    def _describe(self) -> str:
        return f"MQTT {self.version} broker at {self.where}"

    def _require(self, feature: Feature, detail: str = "") -> None:
        """Raise the capability matrix's refusal when this protocol version cannot carry
        ``feature`` (MQTT cannot name its server, so the column is the version)."""
        require("mqtt", self.version, feature, detail=detail, where=f"broker at {self.where}")

    def _refusal(self, feature: Feature, detail: str = "") -> RefusedFeatureException:
        """The matrix's error for a feature this transport has no implementation of."""
        return refusal("mqtt", self.version, feature, detail=detail,
                       where=f"broker at {self.where}")

    def grant_credit(self, consumer_id: int, credits: int) -> None:
        """No wire traffic: MQTT has no per-subscription credit (see module docstring)."""
        with self._lock:
            consumer = self._consumers.get(consumer_id)
            if consumer is not None:
                consumer.credit += credits
                self._release(consumer)

    def revoke_credit(self, consumer_id: int) -> int:
        with self._lock:
            consumer = self._consumers.get(consumer_id)
            if consumer is None:
                return 0
            returned, consumer.credit = consumer.credit, 0
            return returned

    def _release(self, consumer: _Consumer) -> None:
        # Lock held. Hand stashed deliveries over while the core's credit allows.
        listener = self._listener
        auto = False
        while consumer.stash and consumer.credit > 0 and listener is not None:
            tag, message, count = consumer.stash.popleft()
            consumer.credit -= 1
            if consumer.spec.auto_ack:
                self._ack_tag(tag)
                auto = True
            listener.on_delivery(consumer.spec.consumer_id, tag, message, count)
        if auto:
            self._flush_acks()

    # -- receiving (paho's network thread) ------------------------------------------------
    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self._lock:
            rec: _Publish | None = None
            if msg.qos > 0:
                rec = _Publish(msg.mid, msg.qos)
                self._inbound[next(self._seq)] = rec
                self._in_flight += 1
                self._in_flight_max = max(self._in_flight_max, self._in_flight)
            targets = self._route(msg)
            if not targets:
                if self.persistent_session:
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
                            f"unreadable MQTT PUBLISH on {msg.topic!r} from {self.where}: {exc}"
                        )
                    )
                    continue
                self._hand(consumer, rec, message, 2 if msg.dup else 1)
            if rec is not None and rec.copies == 0:
                self._copy_done(rec, count=False)  # every copy filtered out
            self._flush_acks()

    def _route(self, msg: Any) -> list[_Consumer]:
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
        targets: list[_Consumer] = []
        for sub in subs:
            if not sub.consumers:
                continue
            if sub.queue:
                sub.turn = (sub.turn + 1) % len(sub.consumers)
                targets.append(sub.consumers[sub.turn])
            else:
                targets.extend(sub.consumers)
        return targets

    def _convert(self, msg: Any, consumer: _Consumer) -> Message:
        dest: Destination = consumer.spec.destination
        if isinstance(dest, Topic):
            dest = topic_of(msg.topic)
        return from_publish(msg.topic, msg.payload, msg.qos, msg.properties, dest)

    def _hand(
        self, consumer: _Consumer, rec: _Publish | None, message: Message, count: int
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
        if self._listener is not None:
            self._listener.on_transport_error(error)

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
        client = self._client
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
            raise self._refusal(Feature.TRANSACTIONS)
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
