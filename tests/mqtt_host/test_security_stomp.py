"""The broker's security on MQTT logins and topics, and MQTT <-> STOMP on one core."""

from __future__ import annotations

from mqtt_pair import MqttPair, device_policy

from jmspy.broker_ref.protocols.mqtt import codec
from jmspy.broker_ref.protocols.stomp.protocol import StompSession
from jmspy.stomp_frames import Frame


def test_bad_password_is_refused_in_the_connack_both_versions() -> None:
    pair = MqttPair(security=device_policy())
    assert pair.client().connect("a", user="alice", password="wrong")["code"] == 0x04
    assert pair.client(5).connect("b", user="alice", password="wrong")["code"] == 0x86
    assert pair.client(5).connect("c", user="alice", password="alice-pw")["code"] == 0


def test_topic_acls_apply_to_publish_and_wildcard_subscribe() -> None:
    pair = MqttPair(security=device_policy())
    c = pair.client(5)
    c.connect("c", user="alice", password="alice-pw")
    assert c.subscribe(1, ("plant/+", 1))[0]["codes"] == [1]
    assert c.subscribe(2, ("office/#", 1))[0]["codes"] == [0x87]
    assert c.publish("office/door", b"x", qos=1, pid=1) == [
        {"type": codec.PUBACK, "pid": 1, "code": 0x87}]
    out = c.publish("plant/p1", b"ok", qos=1, pid=2)
    assert {(p["type"], p.get("payload")) for p in out} == {
        (codec.PUBACK, None), (codec.PUBLISH, b"ok")}


def test_mqtt_and_stomp_share_topics() -> None:
    pair = MqttPair()
    stomp = StompSession(pair.broker)
    from jmspy import twins

    codec12 = twins.stomp_codec
    stomp.receive_data(codec12.encode_frame(
        Frame("CONNECT", [("accept-version", "1.2"), ("host", "/")]), "1.2"))
    stomp.receive_data(codec12.encode_frame(
        Frame("SUBSCRIBE", [("id", "1"), ("destination", "/topic/a.b")]), "1.2"))
    stomp.data_to_send()
    mqtt = pair.client()
    mqtt.connect("m")
    mqtt.subscribe(1, ("x/y", 0))
    mqtt.publish("a/b", b"to-stomp", qos=1, pid=1)
    parser = codec12.FrameParser("1.2", None, False)
    parser.feed(stomp.data_to_send())
    frame = parser.next_frame()
    assert frame.command == "MESSAGE" and frame.body == b"to-stomp"
    assert frame.header("destination") == "/topic/a.b"
    stomp.receive_data(codec12.encode_frame(
        Frame("SEND", [("destination", "/topic/x.y")], b"to-mqtt"), "1.2"))
    got = pair.inbox(mqtt)
    assert [(m["topic"], m["payload"]) for m in got] == [("x/y", b"to-mqtt")]
