"""The MQTT host's per-subscription and per-connection options, with raw packets in
memory (mqtt_pair.py): retain handling and retain-as-published (MQTT 5 3.8.3.1), the
client's Maximum Packet Size (3.1.2.11.4), Server Keep Alive (3.2.2.3.14, Mosquitto's
max_keepalive), and producer flow control holding a QoS 1 PUBACK."""

from __future__ import annotations

from typing import Any

import pytest
from mqtt_pair import MqttPair, packet

from jmspy.broker_ref.protocols.mqtt import codec
from jmspy.broker_ref.protocols.mqtt.codec import encode_string

RETAIN_AS_PUBLISHED = 8


def _retained(pair: MqttPair) -> None:
    pub = pair.client(5)
    pub.connect("pub")
    pub.publish("status/door", b"open", qos=1, pid=1, retain=True)


@pytest.mark.parametrize(("handling", "first", "again"), [
    (0, [b"open"], [b"open"]),  # at every SUBSCRIBE
    (1, [b"open"], []),  # only when the subscription is new
    (2, [], []),  # never
])
def test_retain_handling_decides_when_the_retained_message_comes(
        handling: int, first: list[bytes], again: list[bytes]) -> None:
    pair = MqttPair()
    _retained(pair)
    sub = pair.client(5)
    sub.connect("sub")
    options = 1 | (handling << 4)
    assert [m["payload"] for m in sub.subscribe(1, ("status/#", options))[1:]] == first
    assert [m["payload"] for m in sub.subscribe(2, ("status/#", options))[1:]] == again


@pytest.mark.parametrize(("options", "flag"), [(1, False), (1 | RETAIN_AS_PUBLISHED, True)])
def test_retain_as_published_keeps_the_flag_on_live_messages(options: int, flag: bool) -> None:
    pair = MqttPair()
    sub, pub = pair.client(5), pair.client(5)
    sub.connect("sub")
    pub.connect("pub")
    sub.subscribe(1, ("live/#", options))
    pub.publish("live/a", b"x", qos=1, pid=1, retain=True)
    (live,) = pair.inbox(sub)
    # a live message goes out with RETAIN 0 unless the subscription keeps it as published
    assert (live["payload"], live["retain"]) == (b"x", flag)


def test_a_packet_over_the_clients_maximum_packet_size_is_not_sent() -> None:
    pair = MqttPair()
    sub, pub = pair.client(5), pair.client(5)
    sub.connect("small", props={"maximum_packet_size": 64})
    pub.connect("pub")
    sub.subscribe(1, ("m/#", 0))
    pub.publish("m/big", b"b" * 200)
    pub.publish("m/small", b"s")
    # MQTT 5 3.1.2.11.4: the broker drops what the client said it cannot take
    assert [m["payload"] for m in pair.inbox(sub)] == [b"s"]


def test_a_v5_client_asking_more_keep_alive_than_the_cap_is_told_the_cap() -> None:
    pair = MqttPair(max_keep_alive=60)
    for asked in (120, 0):
        c = pair.client(5)
        connack = c.connect(f"c{asked}", keep_alive=asked)
        assert connack["code"] == 0 and connack["props"]["server_keep_alive"] == 60
        assert c.session.keep_alive == 60
    modest = pair.client(5)
    connack = modest.connect("modest", keep_alive=30)
    assert "server_keep_alive" not in connack["props"] and modest.session.keep_alive == 30


def test_the_capped_keep_alive_is_the_one_enforced() -> None:
    pair = MqttPair(max_keep_alive=60)
    c = pair.client(5)
    c.connect("c", keep_alive=0)  # asked for none: held to the cap
    pair.clock.advance(89_000)
    assert not c.session.check_keep_alive(pair.broker.now())
    pair.clock.advance(1_001)  # 1.5 x 60 s of silence
    assert c.session.check_keep_alive(pair.broker.now())


def test_a_v311_client_asking_more_keep_alive_than_the_cap_is_refused() -> None:
    pair = MqttPair(max_keep_alive=60)
    c = pair.client()
    assert c.connect("old", keep_alive=120)["code"] == 0x02  # as Mosquitto answers
    assert c.session.closing
    ok = pair.client()
    assert ok.connect("fine", keep_alive=60)["code"] == 0


def _publisher_to_an_absent_subscriber(topic: str) -> tuple[MqttPair, Any]:
    """A broker with room for about six 900-byte messages, a persistent session "sub"
    subscribed to ``topic`` at QoS 1 and gone (DISCONNECT: the session and its
    subscription stay, so what is published waits in the core), and a connected "pub"."""
    pair = MqttPair(memory_limit=6_000, destination_memory_percent=100)
    sub = pair.client()
    sub.connect("sub", clean=False)
    sub.subscribe(1, (topic, 1))
    sub.send(packet(0xE0, b""))
    pub = pair.client()
    pub.connect("pub")
    return pair, pub


def test_producer_flow_control_holds_the_puback_until_memory_frees() -> None:
    pair, pub = _publisher_to_an_absent_subscriber("jobs")
    acks = []
    for pid in range(1, 21):
        acks.extend(p["pid"] for p in pub.publish("jobs", b"j" * 900, qos=1, pid=pid)
                    if p["type"] == codec.PUBACK)
        if pub.session.reading_held:
            break
    held_at = pid
    assert held_at > 2  # some went through before the limit
    assert pub.session.reading_held and held_at not in acks  # no PUBACK for the held one
    assert acks == list(range(1, held_at))
    back = pair.client()
    connack = back.connect("sub", clean=False)
    assert connack["present"]
    for m in back.take() + pair.inbox(back):
        if m["type"] == codec.PUBLISH:
            back.ack(codec.PUBACK, m["pid"])  # consumed: memory frees
    assert held_at in [p["pid"] for p in pair.inbox(pub) if p["type"] == codec.PUBACK]
    assert not pub.session.reading_held


def test_publishes_and_a_disconnect_behind_a_held_publish_wait_and_none_is_lost() -> None:
    """One read holding a burst of QoS 0 PUBLISHes and the DISCONNECT: producer flow
    control holds one midway; what follows waits in the parser (in order) instead of being
    acted on, so the DISCONNECT does not end the connection with the held ones dropped."""
    pair, pub = _publisher_to_an_absent_subscriber("burst")
    burst = b"".join(packet(0x30, encode_string("burst") + f"{i:04d}".encode().ljust(900, b"."))
                     for i in range(20))
    pub.send(burst + packet(0xE0, b""))
    assert pub.session.reading_held and not pub.session.closing
    back = pair.client()
    back.connect("sub", clean=False)
    got: list[bytes] = []
    for _ in range(100):  # consume; each PUBACK frees memory, which lets more through
        fresh = [m for m in back.take() + pair.inbox(back) if m["type"] == codec.PUBLISH]
        if not fresh and not pub.session.reading_held:
            break
        for m in fresh:
            got.append(m["payload"][:4])
            if m["qos"]:
                back.ack(codec.PUBACK, m["pid"])
        pair.pump(pub)  # the publisher's host acts on what waited
    assert got == [f"{i:04d}".encode() for i in range(20)]
    assert pub.session.closing  # its DISCONNECT, acted on last


def test_more_unreleased_qos2_publishes_than_the_receive_maximum_end_the_session() -> None:
    """The broker's CONNACK gives a v5 client its Receive Maximum; the client that sends
    one QoS 2 PUBLISH more without releasing them (no PUBREL) is disconnected with 0x93,
    so a client cannot make the broker hold QoS 2 state without bound."""
    from jmspy.broker_ref.protocols.mqtt.session import RECEIVE_MAXIMUM

    pair = MqttPair()
    c = pair.client(5)
    assert c.connect("flood")["props"]["receive_maximum"] == RECEIVE_MAXIMUM
    for pid in range(1, RECEIVE_MAXIMUM + 1):  # each answered PUBREC, none released
        assert c.publish("q2/flood", b"x", qos=2, pid=pid)[0]["type"] == codec.PUBREC
    (last,) = c.publish("q2/flood", b"x", qos=2, pid=RECEIVE_MAXIMUM + 1)
    assert (last["type"], last["code"]) == (codec.DISCONNECT, 0x93)
    assert c.session.closing


def test_no_local_holds_on_a_persistent_session_across_reconnects() -> None:
    """A persistent session's no-local subscription (a shared durable one in the core,
    which has no no_local there) never gets what its own client id published, from any
    of its connections, and gets everyone else's."""
    pair = MqttPair()
    expiry = {"props": {"session_expiry_interval": 3600}}
    me, other = pair.client(5), pair.client(5)
    me.connect("me", clean=False, **expiry)
    assert me.subscribe(1, ("chat/#", 1 | 4))[0]["codes"] == [1]  # QoS 1, no-local
    other.connect("other")
    me.publish("chat/a", b"mine", qos=1, pid=1)
    other.publish("chat/a", b"theirs", qos=1, pid=1)
    got = [m for m in pair.inbox(me) if m["type"] == codec.PUBLISH]
    assert [m["payload"] for m in got] == [b"theirs"]
    me.ack(codec.PUBACK, got[0]["pid"])
    me.session.connection_lost()

    back = pair.client(5)
    assert back.connect("me", clean=False, **expiry)["present"] is True
    back.publish("chat/b", b"mine again", qos=1, pid=2)
    other.publish("chat/b", b"theirs again", qos=1, pid=2)
    assert [m["payload"] for m in pair.inbox(back) if m["type"] == codec.PUBLISH] == [
        b"theirs again"]
