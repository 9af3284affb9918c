"""The broker's unfinished QoS 1/2 PUBLISHes to a client: a QoS 2 message whose PUBREC
came is the client's (a reconnect never sends it again as a new message, its PUBREL goes
out again with the same packet id), and an acknowledgement that comes after the
subscription closed still frees its place under the client's Receive Maximum."""

from __future__ import annotations

import struct
from typing import Any

from mqtt_pair import Client, MqttPair, packet, subscribe_packet

from jmspy.broker_ref.protocols.mqtt import codec


def _qos2_pair(version: int = 4) -> tuple[MqttPair, dict[str, object]]:
    pair = MqttPair()
    dev = pair.persistent_subscriber("q2/#", 2, version=version)
    persistent: dict[str, object] = {"clean": False}
    if version == 5:
        persistent["props"] = {"session_expiry_interval": 3600}
    pub = pair.client(version)
    pub.connect("pub")
    pub.publish("q2/a", b"once", qos=2, pid=9)
    pub.ack(codec.PUBREL, 9)
    (msg,) = pair.inbox(dev)
    assert dev.ack(codec.PUBREC, msg["pid"]) == [
        {"type": codec.PUBREL, "pid": msg["pid"], "code": 0}]
    dev.session.connection_lost()  # gone before its PUBCOMP
    return pair, {"pid": msg["pid"], **persistent}


def test_a_qos2_message_past_pubrec_is_not_sent_again_after_a_reconnect_only_its_pubrel(
) -> None:
    for version in (4, 5):
        pair, seen = _qos2_pair(version)
        pid = seen.pop("pid")
        back = pair.client(version)
        assert back.connect("dev", **seen)["present"] is True
        again = pair.inbox(back)
        assert again == [{"type": codec.PUBREL, "pid": pid, "code": 0}], again
        assert back.ack(codec.PUBCOMP, pid) == []
        assert back.ack(codec.PUBCOMP, pid) == []  # an unknown id now: ignored


def test_a_pending_pubrel_id_is_not_given_to_a_new_publish() -> None:
    pair, seen = _qos2_pair()
    pid = seen.pop("pid")
    back = pair.client()
    back.connect("dev", **seen)
    got = _three_qos1(pair, "q2/b", back)
    assert pid not in {m["pid"] for m in got}


def test_a_qos2_message_before_pubrec_comes_again_marked_dup_after_a_reconnect() -> None:
    pair = MqttPair()
    dev, pub = pair.persistent_subscriber("q2/#", 2), pair.client()
    pub.connect("pub")
    pub.publish("q2/a", b"unsure", qos=2, pid=1)
    pub.ack(codec.PUBREL, 1)
    assert len(pair.inbox(dev)) == 1
    dev.session.connection_lost()  # the PUBLISH may or may not have arrived
    back = pair.client()
    back.connect("dev", clean=False)
    (again,) = pair.inbox(back)
    assert again["payload"] == b"unsure" and again["dup"] and again["qos"] == 2


def test_a_v5_pubrec_refusal_ends_the_exchange_and_frees_the_window() -> None:
    pair = MqttPair()
    dev, pub = pair.client(5), pair.client(5)
    dev.connect("dev", props={"receive_maximum": 1})
    dev.subscribe(1, ("q2/#", 2))
    pub.connect("pub")
    pub.publish("q2/a", b"no", qos=2, pid=1)
    pub.ack(codec.PUBREL, 1)
    pub.publish("q2/a", b"next", qos=2, pid=2)
    pub.ack(codec.PUBREL, 2)
    (refused,) = pair.inbox(dev)
    answer = dev.send(packet(codec.PUBREC << 4, struct.pack("!HB", refused["pid"], 0x80)
                             + b"\x00"))
    assert [m["payload"] for m in answer] == [b"next"]  # no PUBREL; the window refilled


def test_acks_after_an_unsubscribe_still_free_places_under_receive_maximum() -> None:
    pair = MqttPair()
    dev, pub = pair.client(5), pair.client(5)
    dev.connect("dev", props={"receive_maximum": 1})
    dev.subscribe(1, ("a", 1))
    pub.connect("pub")
    pub.publish("a", b"in flight", qos=1, pid=1)
    (msg,) = pair.inbox(dev)
    unsub = dev.unsubscribe(2, "a")
    assert [p["type"] for p in unsub] == [codec.UNSUBACK]
    dev.ack(codec.PUBACK, msg["pid"])  # acknowledged after its subscription closed
    dev.subscribe(3, ("b", 1))
    pub.publish("b", b"after", qos=1, pid=2)
    assert [m["payload"] for m in pair.inbox(dev)] == [b"after"]



def _three_qos1(pair: MqttPair, topic: str, to: Client) -> list[dict[str, Any]]:
    """A new client publishes 0, 1, 2 at QoS 1 to ``topic``: the PUBLISHes ``to`` gets."""
    pub = pair.client()
    pub.connect(f"pub-{len(pair.clients)}")
    for i in range(3):
        pub.publish(topic, str(i).encode(), qos=1, pid=i + 1)
    got = [m for m in pair.inbox(to) if m["type"] == codec.PUBLISH]
    assert [m["payload"] for m in got] == [b"0", b"1", b"2"]
    return got


def _acked_in_one_read(then: bytes) -> tuple[MqttPair, Any]:
    """A persistent session gets three QoS 1 messages and PUBACKs them all in one read
    with ``then`` behind them (the acknowledgements of a read are settled together)."""
    pair = MqttPair()
    dev = pair.persistent_subscriber("q1/#", 1)
    got = _three_qos1(pair, "q1/a", dev)
    acks = b"".join(packet(0x40, struct.pack("!H", m["pid"])) for m in got)
    return pair, dev.send(acks + then)


def test_pubacks_read_with_a_disconnect_behind_them_are_settled_before_the_session_ends(
) -> None:
    pair, _ = _acked_in_one_read(packet(0xE0, b""))
    back = pair.client()
    assert back.connect("dev", clean=False)["present"] is True
    assert [m for m in pair.inbox(back) if m["type"] == codec.PUBLISH] == []


def test_pubacks_read_with_a_resubscribe_behind_them_are_not_delivered_again() -> None:
    _, answer = _acked_in_one_read(subscribe_packet(2, ("q1/#", 1)))
    assert [m["type"] for m in answer] == [codec.SUBACK]
