"""paho-mqtt 2.2 clients (MQTT 3.1.1 and 5) against the broker's MQTT connector on a
socket, and across protocols: MQTT <-> JMS topic subscribers of the same core."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

paho = pytest.importorskip("paho.mqtt.client")

WAIT = 10.0


class Paho:
    """A paho client whose messages and connect answer land in queues."""

    def __init__(self, url: str, protocol: Any, client_id: str, *,
                 clean_session: bool | None = None) -> None:
        parts = urlsplit(url)
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id,
                                  protocol=protocol, clean_session=clean_session)
        #: CONNACK's session-present flag
        self.session_present: bool | None = None
        self.messages: queue.Queue[Any] = queue.Queue()
        self.connected = threading.Event()
        self.subscribed = threading.Event()
        self.published: queue.Queue[int] = queue.Queue()
        self.client.on_connect = self._on_connect
        self.client.on_message = lambda c, u, msg: self.messages.put(msg)
        self.client.on_subscribe = lambda *a: self.subscribed.set()
        self.client.on_publish = lambda c, u, mid, *a: self.published.put(mid)
        self.client.connect(parts.hostname or "127.0.0.1", parts.port or 1883)
        self.client.loop_start()
        assert self.connected.wait(WAIT)

    def _on_connect(self, client: Any, userdata: Any, flags: Any, *rest: Any) -> None:
        self.session_present = bool(getattr(flags, "session_present", False))
        self.connected.set()

    def subscribe(self, topic: str, qos: int) -> None:
        self.subscribed.clear()
        self.client.subscribe(topic, qos)
        assert self.subscribed.wait(WAIT)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def mqtt_url(vm_broker_factory: Callable[..., Any]) -> Iterator[tuple[str, Any]]:
    host, factory = vm_broker_factory()
    yield host.add_connector("mqtt://127.0.0.1:0"), factory


@pytest.mark.parametrize("version", ["MQTTv311", "MQTTv5"])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_paho_round_trip(mqtt_url: tuple[str, Any], version: str, qos: int) -> None:
    url, _ = mqtt_url
    protocol = getattr(paho, version)
    sub = Paho(url, protocol, f"sub-{version}-{qos}")
    pub = Paho(url, protocol, f"pub-{version}-{qos}")
    try:
        sub.subscribe("sensors/+/temp", qos)
        info = pub.client.publish("sensors/k1/temp", b"21.5", qos=qos)
        info.wait_for_publish(WAIT)
        msg = sub.messages.get(timeout=WAIT)
        assert (msg.topic, msg.payload, msg.qos) == ("sensors/k1/temp", b"21.5", qos)
    finally:
        sub.close()
        pub.close()


def _retained_message_reaches(publish_at: str, subscribe_at: str) -> None:
    """A retained message published through ``publish_at`` goes to a later subscriber
    connected through ``subscribe_at``."""
    pub = Paho(publish_at, paho.MQTTv5, "pub")
    pub.client.publish("status/door", b"open", qos=1, retain=True).wait_for_publish(WAIT)
    pub.close()
    sub = Paho(subscribe_at, paho.MQTTv5, "sub")
    try:
        sub.subscribe("status/#", 1)
        msg = sub.messages.get(timeout=WAIT)
        assert (msg.payload, msg.retain) == (b"open", True)
    finally:
        sub.close()


def test_paho_retained_message(mqtt_url: tuple[str, Any]) -> None:
    url, _ = mqtt_url
    _retained_message_reaches(url, url)


def test_mqtt_publish_reaches_a_jms_topic_subscriber_and_back(
        mqtt_url: tuple[str, Any]) -> None:
    url, factory = mqtt_url
    mqtt = Paho(url, paho.MQTTv5, "dev")
    try:
        with factory.create_context() as context:
            consumer = context.create_consumer(context.create_topic("a.b"))
            mqtt.client.publish("a/b", b"from-mqtt", qos=1).wait_for_publish(WAIT)
            assert consumer.receive_body(bytes, timeout=WAIT) == b"from-mqtt"
            mqtt.subscribe("x/#", 1)
            context.create_producer().send(context.create_topic("x.y"), "from-jms")
            msg = mqtt.messages.get(timeout=WAIT)
            assert (msg.topic, msg.payload, msg.qos) == ("x/y", b"from-jms", 1)
    finally:
        mqtt.close()


def test_jmspy_mqtt_client_round_trip(mqtt_url: tuple[str, Any]) -> None:
    from jmspy import ConnectionFactory

    url, _ = mqtt_url
    with ConnectionFactory(url).create_context() as context:
        topic = context.create_topic("jms.over.mqtt")
        consumer = context.create_consumer(topic)
        context.create_producer().send(topic, "hello")
        assert consumer.receive_body(str, timeout=WAIT) == "hello"


def test_mqtt_connector_url_errors_name_the_form(
        vm_broker_factory: Callable[..., Any]) -> None:
    from jmspy.errors import InvalidConfigurationException

    host, _ = vm_broker_factory()
    for url in ("mqtt://127.0.0.1:0/x", "mqtt://127.0.0.1:0?a=1", "mqtt://127.0.0.1"):
        with pytest.raises(InvalidConfigurationException, match=r"give mqtt://HOST:PORT"):
            host.add_connector(url)
    assert host.add_connector("mqtt://127.0.0.1:0").startswith("mqtt://127.0.0.1:")


def test_a_silent_client_is_closed_after_one_and_a_half_keep_alives(
        mqtt_url: tuple[str, Any]) -> None:
    """On a socket: CONNECT with keep-alive 1 s, then silence; the server closes it
    (waited for on the socket, with a timeout, no sleep)."""
    import socket

    from mqtt_pair import connect_packet

    url, _ = mqtt_url
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=WAIT) as sock:
        sock.sendall(connect_packet("silent", keep_alive=1))
        assert sock.recv(4) == b"\x20\x02\x00\x00"  # CONNACK, accepted
        assert sock.recv(16) == b""  # closed by the server


def test_two_mqtt_connectors_of_one_broker_share_retained_messages_and_sessions(
        vm_broker_factory: Callable[..., Any]) -> None:
    """As one Mosquitto's listeners do: what one connector keeps, the other serves."""
    host, _ = vm_broker_factory()
    first = host.add_connector("mqtt://127.0.0.1:0")
    second = host.add_connector("mqtt://127.0.0.1:0")
    assert first != second
    _retained_message_reaches(first, second)
    # a persistent session made through the first connector is found through the second
    present = []
    for url in (first, second):
        roamer = Paho(url, paho.MQTTv311, "roamer", clean_session=False)
        present.append(roamer.session_present)
        roamer.close()
    assert present == [False, True]
