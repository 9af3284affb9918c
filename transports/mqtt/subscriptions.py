"""Subscribing on ``mqtt://``: a consumer's topic filter and SUBSCRIBE, its SUBACK, the
subscriptions made again after a reconnect, and the durable subscriptions by name.

Several consumers of one connection may share a topic filter: the broker sees one
SUBSCRIBE per filter (:class:`~.inbound.MqttSubscription`), and :class:`~.inbound.Inbound`
hands each delivery to the consumers attached to it. A durable subscription lives in the
broker's session for the client id; MQTT names subscriptions by topic only, so the
names this connection gave are kept here for ``unsubscribe(name)``.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from jmspy import errors
from jmspy.capabilities import Feature
from jmspy.destinations import Destination, Queue
from jmspy.transport import ConsumerSpec, RemoteConsumer

from ..capabilities import supports
from .inbound import Inbound, MqttConsumer, MqttSubscription
from .mapping import mqtt_filter
from .subacks import Subacks

__all__ = ["MqttSubscriptions", "SubscriptionsHost"]


class SubscriptionsHost(Protocol):
    """What :class:`MqttSubscriptions` asks of the transport."""

    @property
    def version(self) -> str: ...

    @property
    def connect_timeout(self) -> float: ...

    @property
    def queue_selectors_discard(self) -> bool: ...

    @property
    def persistent_session(self) -> bool: ...

    @property
    def paho(self) -> Any:
        """The paho client in use, or None."""

    def client(self, wait: bool = True) -> Any: ...

    def describe(self) -> str: ...

    def require(self, feature: Feature, detail: str = "") -> None: ...

    def declare_destination(self, destination: Destination) -> None: ...

    def need_reader(self) -> None:
        """A thread is about to wait for a packet: whoever holds the reading reads."""


class MqttSubscriptions:
    """The SUBSCRIBEs of one transport and the durable subscriptions it named."""

    def __init__(self, host: SubscriptionsHost, inbound: Inbound,
                 lock: threading.RLock) -> None:
        self._host = host
        self._inbound = inbound
        self._lock = lock
        self._durable: dict[str, str] = {}  # subscription name -> filter
        self._subacks = Subacks(host.need_reader)

    def on_suback(self, client: Any, userdata: Any, mid: int, reasons: Any,
                  props: Any) -> None:
        """paho's ``on_subscribe`` and ``on_unsubscribe`` (its network thread)."""
        self._subacks.on_suback(client, userdata, mid, reasons, props)

    def wait_ack(self, rc: int, mid: int, timeout: float) -> list[Any] | None:
        """The reason codes of the SUBACK or UNSUBACK for packet ``mid`` (None: none came
        within ``timeout`` s), for a SUBSCRIBE made outside the consumers' (identify.py)."""
        return self._subacks.wait(rc, mid, timeout)

    def create_consumer(self, spec: ConsumerSpec) -> RemoteConsumer:
        host = self._host
        dest = spec.destination
        host.declare_destination(dest)
        share: str | None = None
        if isinstance(dest, Queue):
            host.require(Feature.QUEUES, "a Queue (competing consumers)")
        elif spec.shared:
            host.require(Feature.SHARED_SUBSCRIPTIONS)
            share = spec.subscription_name
        competing = isinstance(dest, Queue) or spec.shared
        if spec.selector and competing and not host.queue_selectors_discard:
            host.require(Feature.QUEUE_SELECTORS, "a selector on a queue")
        if spec.durable and not host.persistent_session:
            raise errors.IllegalStateException(
                "a durable subscription over MQTT lives in the broker's session for this "
                "client id: create the connection with a client id (clientID=...)"
            )
        if spec.no_local:
            host.require(Feature.NO_LOCAL)
        selector = None
        if spec.selector:
            from jmspy.selector import compile_selector

            selector = compile_selector(spec.selector)
        topic_filter = mqtt_filter(dest, share)
        consumer = MqttConsumer(spec, topic_filter, selector)
        inbound = self._inbound
        sub = inbound.subscription(topic_filter)
        new = sub is None
        if new and not supports("mqtt", host.version, Feature.OVERLAPPING_SUBSCRIPTIONS):
            other = inbound.overlapping(topic_filter)
            if other is not None:
                host.require(
                    Feature.OVERLAPPING_SUBSCRIPTIONS,
                    f"a second subscription {topic_filter!r} overlapping {other!r} on one "
                    "connection",
                )
        if sub is None:
            sub = inbound.new_subscription(topic_filter, competing)
        if spec.durable:
            sub.durable_name = spec.subscription_name
        if new:
            self._subscribe(sub, spec.no_local)
        if spec.durable and spec.subscription_name:
            with self._lock:
                self._durable[spec.subscription_name] = topic_filter
        inbound.attach(sub, consumer)
        return RemoteConsumer(destination_flow_limit=None)

    def subscribe_again(self) -> None:
        """SUBSCRIBE every subscription on a new client (after a reconnect: the broker may
        have lost the session)."""
        for sub in self._inbound.subscriptions():
            no_local = any(c.spec.no_local for c in sub.consumers)
            self._subscribe(sub, no_local, wait=False)

    def _subscribe(self, sub: MqttSubscription, no_local: bool, wait: bool = True) -> None:
        host = self._host
        client = host.client(wait)
        if host.version == "5":
            from paho.mqtt.packettypes import PacketTypes
            from paho.mqtt.properties import Properties
            from paho.mqtt.subscribeoptions import SubscribeOptions

            props = Properties(PacketTypes.SUBSCRIBE)  # type: ignore[no-untyped-call]
            props.SubscriptionIdentifier = sub.sub_id
            rc, mid = client.subscribe(
                sub.topic_filter,
                options=SubscribeOptions(qos=1, noLocal=no_local),
                properties=props,
            )
        else:
            rc, mid = client.subscribe(sub.topic_filter, qos=1)
        codes = self._subacks.wait(rc, mid, host.connect_timeout)
        if codes is None:
            raise errors.JMSException(
                f"the {host.describe()} did not confirm the subscription to {sub.topic_filter!r}"
            )
        failed = [c for c in codes if getattr(c, "is_failure", False)]
        if failed:
            raise errors.JMSException(
                f"the {host.describe()} refused the subscription to {sub.topic_filter!r}: "
                f"{failed[0]}"
            )

    def close_consumer(self, consumer_id: int) -> None:
        unsubscribe = self._inbound.detach(consumer_id)
        client = self._host.paho
        if unsubscribe is not None and client is not None:
            client.unsubscribe(unsubscribe)

    def unsubscribe(self, name: str) -> None:
        """Remove the durable subscription ``name`` this connection created."""
        with self._lock:
            topic_filter = self._durable.get(name)
        active = topic_filter is not None and self._inbound.subscription(topic_filter) is not None
        if topic_filter is None:
            raise errors.InvalidDestinationException(
                f"no durable subscription named {name!r} was created on this MQTT connection; "
                "MQTT identifies subscriptions by topic, so unsubscribe from the connection "
                "(same client id) that created it"
            )
        if active:
            raise errors.IllegalStateException(
                f"durable subscription {name!r} still has an open consumer; close it first"
            )
        self._host.client().unsubscribe(topic_filter)
        with self._lock:
            self._durable.pop(name, None)
