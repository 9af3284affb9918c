"""The sans-I/O MQTT session driven with raw packets (no sockets, a fake clock)."""

from __future__ import annotations

import struct

import pytest
from mqtt_pair import MqttPair, packet

from jmspy.broker_ref.protocols.mqtt import codec
from jmspy.broker_ref.protocols.mqtt.codec import encode_string


def test_connack_and_qos0_round_trip_v311() -> None:
    pair = MqttPair()
    sub, pub = pair.client(), pair.client()
    assert sub.connect("s")["code"] == 0
    assert pub.connect("p")["code"] == 0
    assert sub.subscribe(1, ("a/+", 0)) == [{"type": codec.SUBACK, "pid": 1, "codes": [0]}]
    assert pub.publish("a/b", b"hello") == []
    got = pair.inbox(sub)
    assert [(g["topic"], g["payload"], g["qos"]) for g in got] == [("a/b", b"hello", 0)]


def test_qos1_both_ways_and_the_window_refills() -> None:
    pair = MqttPair()
    sub, pub = pair.client(), pair.client()
    sub.connect("s")
    pub.connect("p")
    sub.subscribe(1, ("t/#", 1))
    assert pub.publish("t/x", b"1", qos=1, pid=7) == [
        {"type": codec.PUBACK, "pid": 7, "code": 0}]
    (msg,) = pair.inbox(sub)
    assert msg["qos"] == 1 and msg["pid"] and not msg["dup"]
    assert sub.ack(codec.PUBACK, msg["pid"]) == []
    pub.publish("t/y", b"2", qos=1, pid=8)
    assert [m["payload"] for m in pair.inbox(sub)] == [b"2"]


def test_receive_maximum_limits_unacknowledged_deliveries() -> None:
    pair = MqttPair()
    sub, pub = pair.client(5), pair.client(5)
    sub.connect("s", props={"receive_maximum": 2})
    pub.connect("p")
    sub.subscribe(1, ("q", 1))
    for i in range(5):
        pub.publish("q", str(i).encode(), qos=1, pid=i + 1)
    first = pair.inbox(sub)
    assert [m["payload"] for m in first] == [b"0", b"1"]
    assert [m["payload"] for m in sub.ack(codec.PUBACK, first[0]["pid"])] == [b"2"]


def test_qos2_handshake_routes_once() -> None:
    pair = MqttPair()
    sub, pub = pair.client(), pair.client()
    sub.connect("s")
    pub.connect("p")
    sub.subscribe(1, ("q2", 2))
    assert pub.publish("q2", b"x", qos=2, pid=3)[0]["type"] == codec.PUBREC
    assert pub.publish("q2", b"x", qos=2, pid=3, dup=True)[0]["type"] == codec.PUBREC
    assert pub.ack(codec.PUBREL, 3) == [{"type": codec.PUBCOMP, "pid": 3, "code": 0}]
    (msg,) = pair.inbox(sub)
    assert msg["qos"] == 2
    assert sub.ack(codec.PUBREC, msg["pid"]) == [
        {"type": codec.PUBREL, "pid": msg["pid"], "code": 0}]
    assert sub.ack(codec.PUBCOMP, msg["pid"]) == []


def test_retained_message_goes_to_later_subscribers() -> None:
    pair = MqttPair()
    pub, sub = pair.client(), pair.client()
    pub.connect("p")
    pub.publish("r/1", b"kept", qos=1, pid=1, retain=True)
    sub.connect("s")
    out = sub.subscribe(1, ("r/#", 1))
    assert out[0]["type"] == codec.SUBACK
    assert [(m["payload"], m["retain"]) for m in out[1:]] == [(b"kept", True)]
    pub.publish("r/1", b"", retain=True)  # cleared
    late = pair.client()
    late.connect("late")
    assert late.subscribe(1, ("r/#", 0))[1:] == []


def test_malformed_and_oversized_packets_close_with_a_reason() -> None:
    pair = MqttPair(max_bytes=1000)
    c = pair.client(5)
    c.connect("c")
    out = c.send(packet(0x30, b"\xff"))  # PUBLISH whose topic length runs off the end
    assert out[0]["type"] == codec.DISCONNECT and out[0]["code"] == 0x81
    assert c.session.closing
    big = pair.client(5)
    big.connect("big")
    out = big.publish("t", b"x" * 2000)
    assert out[0]["code"] == 0x95 and "maximum packet size" in out[0]["props"]["reason_string"]
    v3 = pair.client()
    v3.connect("v3")
    assert v3.send(b"\x00\x00") == [] and v3.session.closing  # packet type 0


def test_first_packet_must_be_connect() -> None:
    pair = MqttPair()
    c = pair.client()
    assert c.send(packet(0xC0, b"")) == [] and c.session.closing


def test_keep_alive_closes_after_one_and_a_half_intervals_and_sends_the_will() -> None:
    pair = MqttPair()
    watcher = pair.client()
    watcher.connect("w")
    watcher.subscribe(1, ("wills/#", 0))
    dev = pair.client()
    dev.connect("dev", keep_alive=10, will=("wills/dev", b"gone", 0))
    pair.clock.advance(14_000)
    assert not dev.session.check_keep_alive(pair.broker.now())
    dev.send(packet(0xC0, b""))  # PINGREQ resets it
    pair.clock.advance(15_001)
    assert dev.session.check_keep_alive(pair.broker.now())
    assert [m["payload"] for m in pair.inbox(watcher)] == [b"gone"]


def test_normal_disconnect_drops_the_will() -> None:
    pair = MqttPair()
    watcher = pair.client()
    watcher.connect("w")
    watcher.subscribe(1, ("wills/#", 0))
    dev = pair.client()
    dev.connect("dev", will=("wills/dev", b"gone", 0))
    dev.send(packet(0xE0, b""))
    assert dev.session.closing and pair.inbox(watcher) == []


def test_persistent_session_keeps_subscription_and_qos1_messages() -> None:
    pair = MqttPair()
    dev, pub = pair.client(), pair.client()
    dev.connect("dev", clean=False)
    dev.subscribe(1, ("cmd/#", 1))
    dev.session.connection_lost()
    pub.connect("p")
    pub.publish("cmd/go", b"later", qos=1, pid=1)
    back = pair.client()
    assert back.connect("dev", clean=False)["present"] is True
    assert [m["payload"] for m in pair.inbox(back)] == [b"later"]
    again = pair.client()
    assert again.connect("dev", clean=True)["present"] is False


def test_a_v5_session_resumed_without_an_expiry_gets_what_waited_then_ends() -> None:
    """MQTT 5: a reconnect with Clean Start 0 and no Session Expiry Interval (so 0)
    resumes the stored session, its messages included, and the session ends when this
    connection does (the Paho interoperability suite's offline-queueing case)."""
    pair = MqttPair()
    dev, pub = pair.client(5), pair.client(5)
    dev.connect("dev", props={"session_expiry_interval": 99999})
    dev.subscribe(1, ("cmd/+", 2))
    dev.send(packet(0xE0, b"\x00"))  # DISCONNECT: the session stays for 99999 s
    pub.connect("p")
    pub.publish("cmd/a", b"one", qos=1, pid=1)
    pub.publish("cmd/b", b"two", qos=2, pid=2)
    back = pair.client(5)
    assert back.connect("dev", clean=False)["present"] is True
    assert sorted(m["payload"] for m in pair.inbox(back)
                  if m["type"] == codec.PUBLISH) == [b"one", b"two"]
    back.send(packet(0xE0, b"\x00"))  # its expiry was 0: the session is gone now
    assert pair.client(5).connect("dev", clean=False)["present"] is False


def test_v5_session_expiry_ends_a_stored_session() -> None:
    pair = MqttPair()
    dev = pair.client(5)
    dev.connect("dev", clean=False, props={"session_expiry_interval": 10})
    dev.subscribe(1, ("x", 1))
    dev.session.connection_lost()
    pair.clock.advance(10_000)
    pair.hub.process(pair.broker.now())
    back = pair.client(5)
    assert back.connect("dev", clean=False)["present"] is False


def test_v5_no_local_subscription_identifier_and_properties() -> None:
    pair = MqttPair()
    c = pair.client(5)
    c.connect("c")
    c.subscribe(1, ("own", 1 | 4))  # no-local
    c.subscribe(2, ("other", 1), props={"subscription_identifier": [42]})
    assert c.publish("own", b"mine", qos=1, pid=1)[0]["type"] == codec.PUBACK
    out = c.publish("other", b"req", qos=1, pid=2, props={
        "response_topic": "replies/c", "correlation_data": b"\x01\x02",
        "user_property": [("k", "v")], "content_type": "text/plain",
        "payload_format_indicator": 1, "message_expiry_interval": 60})
    (msg,) = [m for m in out if m["type"] == codec.PUBLISH]
    props = msg["props"]
    assert props["subscription_identifier"] == [42]
    assert props["response_topic"] == "replies/c"
    assert props["correlation_data"] == b"\x01\x02"
    assert ("k", "v") in props["user_property"]
    assert props["content_type"] == "text/plain"
    assert props["message_expiry_interval"] == 60


def test_v5_topic_alias() -> None:
    pair = MqttPair()
    c = pair.client(5)
    c.connect("c")
    c.subscribe(1, ("al/x", 0))
    out = c.publish("al/x", b"1", props={"topic_alias": 1})
    out += c.publish("", b"2", props={"topic_alias": 1})
    assert [m["payload"] for m in out if m["type"] == codec.PUBLISH] == [
        b"1", b"2"]
    bad = c.publish("", b"3", props={"topic_alias": 99})
    assert bad[0]["type"] == codec.DISCONNECT and bad[0]["code"] == 0x94


def test_shared_subscription_shares_messages() -> None:
    pair = MqttPair()
    a, b, pub = pair.client(), pair.client(), pair.client()
    for c, name in ((a, "a"), (b, "b"), (pub, "p")):
        c.connect(name)
    a.subscribe(1, ("$share/g/jobs", 0))
    b.subscribe(1, ("$share/g/jobs", 0))
    for i in range(4):
        pub.publish("jobs", str(i).encode())
    got_a, got_b = pair.inbox(a), pair.inbox(b)
    assert len(got_a) + len(got_b) == 4 and got_a and got_b


def test_takeover_closes_the_old_session() -> None:
    pair = MqttPair()
    old = pair.client(5)
    old.connect("same")
    new = pair.client(5)
    new.connect("same")
    assert old.session.closing
    assert [p["code"] for p in pair.inbox(old)] == [0x8E]


def test_bad_filter_is_refused_in_the_suback() -> None:
    pair = MqttPair()
    c = pair.client()
    c.connect("c")
    assert c.subscribe(1, ("a/#/b", 0))[0]["codes"] == [0x80]


@pytest.mark.parametrize("version", [4, 5])
def test_sys_broker_version_answers_each_subscriber_with_a_retained_message(
        version: int) -> None:
    """The one $SYS topic served: Mosquitto's $SYS/broker/version, so a client (its
    messaging.system) can tell which broker it reached; answered, never stored."""
    pair = MqttPair()
    c = pair.client(version)
    c.connect("c")
    suback, version_msg = c.subscribe(1, ("$SYS/broker/version", 0))
    assert suback == {"type": codec.SUBACK, "pid": 1, "codes": [0]}
    assert version_msg["topic"] == "$SYS/broker/version" and version_msg["retain"]
    assert version_msg["payload"].startswith(b"jmspy")
    assert c.subscribe(2, ("$SYS/broker/version", 0))[1]["payload"] == version_msg["payload"]
    unsubscribe = struct.pack("!H", 3) + (b"\x00" if version == 5 else b"")
    (unsuback,) = c.send(packet(0xA2, unsubscribe + encode_string("$SYS/broker/version")))
    assert unsuback["type"] == codec.UNSUBACK and unsuback["codes"] in ([], [0])
    other = c.subscribe(4, ("$SYS/broker/uptime", 0), ("$SYS/#", 0))[0]
    assert other["codes"] == [0x8F if version == 5 else 0x80] * 2
    # a client may not publish there: the session ends (v5: DISCONNECT, topic name invalid)
    out = c.publish("$SYS/broker/version", b"spoofed", qos=1, pid=5)
    assert c.session.closing
    assert [p["code"] for p in out] == ([0x90] if version == 5 else [])


def test_random_bytes_never_raise_out_of_the_session() -> None:
    """Fuzzed input: the session closes (or waits for more), it never raises."""
    import random

    rng = random.Random(51)
    pair = MqttPair(max_bytes=4096)
    for version in (4, 5):
        for _ in range(300):
            c = pair.client(version)
            c.connect("f")
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
            c.send(data)  # must not raise
            c.session.connection_lost()


def test_a_name_the_core_refuses_ends_the_session_with_its_reason() -> None:
    pair = MqttPair(max_destination_length=16)
    c = pair.client(5)
    c.connect("c")
    out = c.publish("a/" + "b" * 40, b"x", qos=1, pid=1)
    assert out[0]["type"] == codec.DISCONNECT and out[0]["code"] == 0x80
    assert out[0]["props"]["reason_string"]


def test_v5_will_delay_and_a_return_within_it() -> None:
    pair = MqttPair()
    watcher = pair.client()
    watcher.connect("w")
    watcher.subscribe(1, ("wills/#", 0))
    options = dict(clean=False, props={"session_expiry_interval": 60},
                   will=("wills/dev", b"gone", 0), will_props={"will_delay_interval": 5})
    dev = pair.client(5)
    dev.connect("dev", **options)
    dev.session.connection_lost()
    pair.clock.advance(4_000)
    pair.hub.process(pair.broker.now())
    assert pair.inbox(watcher) == []  # not yet
    pair.clock.advance(1_000)
    pair.hub.process(pair.broker.now())
    assert [m["payload"] for m in pair.inbox(watcher)] == [b"gone"]
    again = pair.client(5)
    again.connect("dev", **options)
    again.session.connection_lost()
    back = pair.client(5)
    back.connect("dev", clean=False, props={"session_expiry_interval": 60})
    pair.clock.advance(10_000)
    pair.hub.process(pair.broker.now())
    assert pair.inbox(watcher) == []  # it came back within the delay: no will


def test_empty_levels_are_topic_levels_of_their_own() -> None:
    """"/TopicA", "a//b" are valid MQTT topics (4.7.1.3: an empty level is a level); "+"
    matches an empty level and "#" everything (the Paho interoperability suite's
    topics). A will on "/TopicA" is accepted too."""
    pair = MqttPair()
    sub, pub = pair.client(), pair.client()
    sub.connect("s")
    assert pub.connect("p", will=("/TopicA", b"bye", 0))["code"] == 0
    assert sub.subscribe(1, ("/+", 0), ("+/+", 0), ("a//b", 0))[0]["codes"] == [0, 0, 0]
    pub.publish("/TopicA", b"1")
    pub.publish("a//b", b"2")
    got = pair.inbox(sub)
    assert sorted((m["topic"], m["payload"]) for m in got) == [
        ("/TopicA", b"1"), ("/TopicA", b"1"), ("a//b", b"2")]  # "/+" and "+/+" both match


def test_a_session_that_ends_before_the_will_delay_sends_the_will_then() -> None:
    """MQTT 5 3.1.3.2.2: the will waits for its delay or the session's end, whichever
    comes first: a 5 s delay on a session that expires after 2 s goes out at 2 s."""
    pair = MqttPair()
    watcher = pair.client()
    watcher.connect("w")
    watcher.subscribe(1, ("wills/#", 0))
    dev = pair.client(5)
    dev.connect("dev", props={"session_expiry_interval": 2},
                will=("wills/dev", b"gone", 0), will_props={"will_delay_interval": 5})
    dev.session.connection_lost()
    pair.clock.advance(1_900)
    pair.hub.process(pair.broker.now())
    assert pair.inbox(watcher) == []  # neither the delay nor the session is over
    pair.clock.advance(200)
    pair.hub.process(pair.broker.now())  # the session expired: its will goes with it
    assert [m["payload"] for m in pair.inbox(watcher)] == [b"gone"]


@pytest.mark.parametrize("version", [4, 5])
def test_dollar_topics_reach_filters_naming_them_never_ones_starting_with_a_wildcard(
        version: int) -> None:
    """Topics starting with '$' (other than $SYS) are served as Mosquitto serves them,
    and a filter that starts with a wildcard does not match them (MQTT-4.7.2-1): not
    live, not retained, not through a shared subscription."""
    pair = MqttPair()
    wild, named, shared, pub = (pair.client(version) for _ in range(4))
    wild.connect("wild")
    assert wild.subscribe(1, ("#", 1), ("+/B", 1))[0]["codes"] == [1, 1]
    named.connect("named")
    assert named.subscribe(1, ("$TopicA/#", 1))[0]["codes"] == [1]
    if version == 5:
        shared.connect("shared")
        assert shared.subscribe(1, ("$share/g/+/B", 1))[0]["codes"] == [1]
    pub.connect("pub")
    assert pub.publish("$TopicA/B", b"dollar", qos=1, pid=1, retain=True) == [
        {"type": codec.PUBACK, "pid": 1, "code": 0}]
    pub.publish("TopicA/B", b"plain", qos=1, pid=2)
    assert [m["payload"] for m in pair.inbox(named)] == [b"dollar"]
    got = [m for m in pair.inbox(wild) if m["type"] == codec.PUBLISH]
    assert [m["payload"] for m in got] == [b"plain", b"plain"]  # '#' and '+/B'
    for m in got:
        wild.ack(codec.PUBACK, m["pid"])
    if version == 5:
        assert [m["payload"] for m in pair.inbox(shared)] == [b"plain"]
    late = pair.client(version)
    late.connect("late")
    retained = [m for m in late.subscribe(1, ("#", 0), ("$TopicA/B", 0))
                if m["type"] == codec.PUBLISH]
    assert [(m["topic"], m["payload"]) for m in retained] == [("$TopicA/B", b"dollar")]
