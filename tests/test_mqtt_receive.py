"""mqtt:// decodes received PUBLISH packets itself (transports/mqtt/receive.py); paho's
own decoder is the oracle.

Packets whose properties paho's encoder wrote (every property a PUBLISH may carry, in any
order, repeats where allowed) must decode to exactly what paho's ``decode_publish``
gives: topic, packet id, flags, payload and each property. Arbitrary bytes must either
decode to what paho gives too, or be left to paho (None), never to something else. A
client with the decoder installed must hand its ``on_message`` such a message without
paho's decoder running, and leave QoS 2 and broken packets to paho.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import paho.mqtt._packet as paho_packet
import paho.mqtt.client as paho
import pytest
from hypothesis import HealthCheck, given, settings
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from jmspy.transports.mqtt.paho_private.publish_read import install
from jmspy.transports.mqtt.receive import ReceivedMessage, decode_publish_properties

SETTINGS = settings(max_examples=400, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

_NAMES = ("ContentType", "CorrelationData", "MessageExpiryInterval", "PayloadFormatIndicator",
          "ResponseTopic", "SubscriptionIdentifier", "TopicAlias", "UserProperty")

# what MQTT strings may hold: no surrogates, U+0000 or U+FEFF (paho refuses those)
texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\ufeff"),
                max_size=12)


@st.composite
def paho_properties(draw: st.DrawFn) -> Properties:
    props = Properties(PacketTypes.PUBLISH)
    if draw(st.booleans()):
        props.ContentType = draw(texts)
    if draw(st.booleans()):
        props.ResponseTopic = draw(texts)
    if draw(st.booleans()):
        props.CorrelationData = draw(st.binary(max_size=12))
    if draw(st.booleans()):
        props.PayloadFormatIndicator = draw(st.integers(0, 1))
    if draw(st.booleans()):
        props.MessageExpiryInterval = draw(st.integers(0, 2**32 - 1))
    if draw(st.booleans()):
        props.TopicAlias = draw(st.integers(1, 2**16 - 1))
    for _ in range(draw(st.integers(0, 3))):
        props.UserProperty = (draw(texts), draw(texts))
    for _ in range(draw(st.integers(0, 2))):
        props.SubscriptionIdentifier = draw(st.integers(1, 2**28 - 1))
    return props


def _variable_header(topic: bytes, qos: int, mid: int) -> bytes:
    return len(topic).to_bytes(2, "big") + topic + (mid.to_bytes(2, "big") if qos else b"")


def _same(mine: Any, theirs: Any) -> None:
    for name in _NAMES:
        assert getattr(mine, name, None) == getattr(theirs, name, None), name


@SETTINGS
@given(props=paho_properties(), topic=st.binary(min_size=1, max_size=10),
       qos=st.integers(0, 1), mid=st.integers(1, 65535), payload=st.binary(max_size=30))
def test_properties_paho_wrote_decode_as_paho_decodes_them(
    props: Properties, topic: bytes, qos: int, mid: int, payload: bytes
) -> None:
    data = _variable_header(topic, qos, mid) + props.pack() + payload
    start = len(_variable_header(topic, qos, mid))
    decoded = decode_publish_properties(data, start)
    assert decoded is not None  # a valid packet never falls back
    mine, end = decoded
    theirs = paho_packet.decode_publish(0x30 | qos << 1, data, MQTTProtocolVersion.MQTTv5)
    _same(mine, theirs.properties)
    assert data[end:] == theirs.payload


@SETTINGS
@given(data=st.binary(max_size=40), start=st.integers(0, 4))
def test_arbitrary_bytes_decode_as_paho_does_or_are_left_to_paho(data: bytes, start: int) -> None:
    decoded = decode_publish_properties(data, start)
    if decoded is None:
        return
    mine, end = decoded
    reference = Properties(PacketTypes.PUBLISH)
    _, length = reference.unpack(data[start:])  # must not raise: we accepted the bytes
    assert end == start + length
    _same(mine, reference)


def _client(protocol: int = paho.MQTTv5, manual_ack: bool = True) -> Any:
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=protocol, manual_ack=manual_ack)
    got: list[Any] = []
    client.on_message = lambda c, u, m: got.append(m)
    client.got = got
    return client


def _feed(client: Any, header: int, packet: bytes) -> Any:
    client._in_packet = {"command": header, "packet": packet}
    return client._handle_publish()


def test_installed_client_delivers_without_paho_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    client = _client()
    assert install(client)
    monkeypatch.setattr(paho_packet, "decode_publish",
                        lambda *a: pytest.fail("paho's PUBLISH decoder ran"))
    props = Properties(PacketTypes.PUBLISH)
    props.ContentType = "text/plain"
    props.UserProperty = ("jmspy-h", "1;5;text;0;;;ID:1")
    body = _variable_header(b"a/b", 1, 7) + props.pack() + b"hello"
    assert _feed(client, 0x30 | 0x08 | 0x02 | 0x01, body) == paho.MQTT_ERR_SUCCESS
    (m,) = client.got
    assert (m.topic, m.mid, m.qos, m.dup, m.retain, m.payload) == ("a/b", 7, 1, True, True,
                                                                  b"hello")
    assert m.properties.ContentType == "text/plain"
    assert m.properties.UserProperty == [("jmspy-h", "1;5;text;0;;;ID:1")]
    assert client._out_packet == type(client._out_packet)()  # no PUBACK: jmspy acks


def test_mqtt311_publish_has_no_properties() -> None:
    client = _client(paho.MQTTv311)
    assert install(client)
    _feed(client, 0x32, _variable_header(b"t", 1, 3) + b"\x01\x02")
    (m,) = client.got
    assert (m.topic, m.mid, m.payload, m.properties) == ("t", 3, b"\x01\x02", None)


def test_broken_packet_and_qos2_go_to_paho(monkeypatch: pytest.MonkeyPatch) -> None:
    client = _client()
    assert install(client)
    calls: list[int] = []
    real = paho_packet.decode_publish

    def spy(header: int, packet: bytes, protocol: Any) -> Any:
        calls.append(header)
        return real(header, packet, protocol)

    monkeypatch.setattr(paho_packet, "decode_publish", spy)
    with pytest.raises(paho.MalformedPacket if hasattr(paho, "MalformedPacket")
                       else Exception):
        _feed(client, 0x32, _variable_header(b"t", 1, 3) + b"\x05\x7f\x00")  # bad property
    _feed(client, 0x34, _variable_header(b"t", 2, 4) + b"\x00" + b"q2")
    assert calls == [0x32, 0x34]
    assert client._in_messages[4].payload == b"q2"  # paho holds it for PUBREL (QoS 2)


def test_install_refuses_a_client_that_acks_by_itself() -> None:
    """paho acknowledges on its own without manual_ack; the fast path does not, so it
    must not take over such a client."""
    assert not install(_client(manual_ack=False))


@SETTINGS
@given(props=paho_properties(), topic=texts.filter(bool), qos=st.integers(0, 1),
       mid=st.integers(1, 65535), payload=st.binary(max_size=30), dup=st.booleans(),
       retain=st.booleans(), v5=st.booleans())
def test_on_message_gets_what_pahos_dispatch_gives(
    props: Properties, topic: str, qos: int, mid: int, payload: bytes, dup: bool,
    retain: bool, v5: bool
) -> None:
    """The installed client hands on_message a ReceivedMessage; a plain paho client fed the
    same packet hands it an MQTTMessage: every attribute the transport reads agrees."""
    protocol = paho.MQTTv5 if v5 else paho.MQTTv311
    header = 0x30 | qos << 1 | (0x08 if dup and qos else 0) | (0x01 if retain else 0)
    body = _variable_header(topic.encode(), qos, mid) + (props.pack() if v5 else b"") + payload
    ours, theirs = _client(protocol), _client(protocol)
    assert install(ours)
    _feed(ours, header, body)
    _feed(theirs, header, body)
    (mine,), (pahos,) = ours.got, theirs.got
    assert isinstance(mine, ReceivedMessage) and isinstance(pahos, paho.MQTTMessage)
    for name in ("topic", "mid", "qos", "dup", "retain", "payload"):
        assert getattr(mine, name) == getattr(pahos, name), name
    if v5:
        _same(mine.properties, pahos.properties)
    else:
        assert mine.properties is None and pahos.properties is None


def test_filtered_callbacks_and_non_utf8_topics_get_pahos_dispatch() -> None:
    client = _client()
    assert install(client)
    filtered: list[Any] = []
    client.message_callback_add("a/#", lambda c, u, m: filtered.append(m))
    _feed(client, 0x32, _variable_header(b"a/b", 1, 1) + b"\x00" + b"x")
    _feed(client, 0x32, _variable_header(b"z", 1, 2) + b"\x00" + b"y")
    assert [(m.topic, type(m)) for m in filtered] == [("a/b", paho.MQTTMessage)]
    assert [(m.topic, type(m)) for m in client.got] == [("z", paho.MQTTMessage)]
    client.message_callback_remove("a/#")
    plain = _client(paho.MQTTv311)
    assert install(plain)
    _feed(plain, 0x32, _variable_header(b"\xff\xfe", 1, 3) + b"z")  # not UTF-8
    (m,) = plain.got
    assert type(m) is paho.MQTTMessage and m.payload == b"z"


@pytest.mark.parametrize("suppress", [False, True])
def test_an_on_message_exception_is_raised_or_suppressed_as_paho_does(suppress: bool) -> None:
    client = _client()
    assert install(client)
    client.suppress_exceptions = suppress

    def boom(c: Any, u: Any, m: Any) -> None:
        raise RuntimeError("listener failed")

    client.on_message = boom
    feed = _variable_header(b"t", 1, 4) + b"\x00" + b"p"
    if suppress:
        assert _feed(client, 0x32, feed) == paho.MQTT_ERR_SUCCESS
    else:
        with pytest.raises(RuntimeError, match="listener failed"):
            _feed(client, 0x32, feed)
