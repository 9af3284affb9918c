"""MQTT logins in the sans-I/O session: a client that cannot log in takes no session
over and cancels no will; with ``defer_login`` (the socket host checks credentials off
its event loop) CONNECT stops the session until the host answers, and the packets sent
behind CONNECT are acted on after the CONNACK, in order."""

from __future__ import annotations

from mqtt_pair import MqttPair, connect_packet, device_policy, subscribe_packet

from jmspy.broker_ref.core.security import Principal
from jmspy.broker_ref.protocols.mqtt import codec


def test_a_wrong_password_does_not_take_the_connected_session_over() -> None:
    for version, refusal in ((4, 0x04), (5, 0x86)):
        pair = MqttPair(security=device_policy())
        dev, pub = pair.client(version), pair.client(version)
        dev.connect("dev", user="alice", password="alice-pw",
                    will=("plant/dev/status", b"gone", 1))
        dev.subscribe(1, ("plant/#", 1))
        intruder = pair.client(version)
        assert intruder.connect("dev", user="alice", password="guess")["code"] == refusal
        assert not dev.session.closing and dev.session.connected
        pub.connect("pub", user="alice", password="alice-pw")
        pub.publish("plant/p1", b"still here", qos=1, pid=1)
        assert [m["payload"] for m in pair.inbox(dev)] == [b"still here"]
        # the intruder's try neither sent nor dropped dev's will: it goes when dev dies
        watcher = pair.client(version)
        watcher.connect("watcher", user="alice", password="alice-pw")
        watcher.subscribe(1, ("plant/dev/status", 1))
        dev.session.connection_lost()
        assert [m["payload"] for m in pair.inbox(watcher)] == [b"gone"]


def test_a_deferred_login_holds_what_follows_connect_until_the_host_answers() -> None:
    pair = MqttPair(security=device_policy())
    dev = pair.client(5)
    dev.session.defer_login = True
    assert dev.send(connect_packet("dev", version=5, user="alice", password="alice-pw")
                    + subscribe_packet(1, ("plant/#", 1), version=5)) == []
    request = dev.session.login_request
    assert request is not None and request.user == "alice"
    assert dev.session.reading_held and not dev.session.connected
    dev.session.login_done(Principal("alice", frozenset({"devices"})))
    answer = dev.take()
    answer += dev.take()  # the SUBSCRIBE that waited, as the host acts on it
    assert [p["type"] for p in answer] == [codec.CONNACK, codec.SUBACK]
    assert answer[0]["code"] == 0 and answer[1]["codes"] == [1]
    assert not dev.session.reading_held


def test_a_refused_deferred_login_answers_the_connack_with_its_reason() -> None:
    for throttled, v5_code, v311_code in ((False, 0x86, 0x04), (True, 0x9F, 0x03)):
        for version, code in ((5, v5_code), (4, v311_code)):
            pair = MqttPair(security=device_policy())
            dev = pair.client(version)
            dev.session.defer_login = True
            dev.send(connect_packet("dev", version=version, user="alice", password="x"))
            dev.session.login_refused(throttled, "too many failed logins")
            (connack,) = dev.take()
            assert connack["type"] == codec.CONNACK and connack["code"] == code
            if version == 5:
                assert connack["props"]["reason_string"] == "too many failed logins"
            assert dev.session.closing and dev.session.login_request is None


def test_without_security_nothing_is_deferred() -> None:
    pair = MqttPair()
    dev = pair.client(5)
    dev.session.defer_login = True
    assert dev.connect("dev")["code"] == 0
    assert dev.session.login_request is None
