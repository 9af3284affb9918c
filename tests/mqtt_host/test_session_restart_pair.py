"""What MQTT state a broker restart keeps when the broker has a store (Mosquitto's
``persistence true``): persistent sessions with their subscriptions as they were asked
for, the messages that waited for them, the QoS 2 packet ids in flight both ways, the
retained messages, and the session expiry clock. The broker "crashes" as ``kill -9``
kills it (nothing closed) and a new one starts on the same store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from broker_core.core_support import Disk
from mqtt_pair import MqttPair

from jmspy.broker_ref.protocols.mqtt import codec
from jmspy.broker_ref.protocols.mqtt.hub_store import SESSIONS


@pytest.fixture(params=["memory", "sqlite"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Disk:
    return Disk(request.param, tmp_path / "messages.sqlite")


def _persistent(version: int) -> dict[str, Any]:
    if version == 5:
        return {"clean": False, "props": {"session_expiry_interval": 3600}}
    return {"clean": False}


def _publishes(got: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in got if p["type"] == codec.PUBLISH]


@pytest.mark.parametrize("version", [4, 5])
def test_a_persistent_session_gets_what_waited_for_it_after_a_restart_without_subscribing(
        disk: Disk, version: int) -> None:
    pair = MqttPair(store=disk.store)
    dev, pub = pair.client(version), pair.client(version)
    dev.connect("dev", **_persistent(version))
    props = {"subscription_identifier": [7]} if version == 5 else None
    dev.subscribe(1, ("plant/#", 1), props=props)
    dev.session.connection_lost()
    pub.connect("pub")
    assert pub.publish("plant/a", b"m1", qos=1, pid=3) == [
        {"type": codec.PUBACK, "pid": 3, "code": 0}]

    pair.crash_and_restart(disk.reopen())
    back = pair.client(version)
    assert back.connect("dev", **_persistent(version))["present"] is True
    (got,) = _publishes(pair.inbox(back))
    assert (got["topic"], got["payload"], got["qos"]) == ("plant/a", b"m1", 1)
    if version == 5:
        assert got["props"]["subscription_identifier"] == [7]
    back.ack(codec.PUBACK, got["pid"])
    # the subscription is live again, not only its backlog
    pub2 = pair.client(version)
    pub2.connect("pub2")
    pub2.publish("plant/b", b"m2", qos=1, pid=4)
    assert [p["payload"] for p in _publishes(pair.inbox(back))] == [b"m2"]


def test_a_qos2_publish_routed_before_a_restart_is_not_routed_again_when_resent(
        disk: Disk) -> None:
    pair = MqttPair(store=disk.store)
    dev, pub = pair.persistent_subscriber("q2/#", 2), pair.client()
    dev.session.connection_lost()
    pub.connect("pub", clean=False)
    assert pub.publish("q2/a", b"once", qos=2, pid=5) == [
        {"type": codec.PUBREC, "pid": 5, "code": 0}]

    pair.crash_and_restart(disk.reopen())  # before the publisher's PUBREL
    pub = pair.client()
    assert pub.connect("pub", clean=False)["present"] is True
    assert pub.publish("q2/a", b"once", qos=2, pid=5, dup=True) == [
        {"type": codec.PUBREC, "pid": 5, "code": 0}]
    assert pub.ack(codec.PUBREL, 5) == [{"type": codec.PUBCOMP, "pid": 5, "code": 0}]
    dev = pair.client()
    dev.connect("dev", clean=False)
    assert [p["payload"] for p in _publishes(pair.inbox(dev))] == [b"once"]


def test_a_pubrel_waiting_for_its_pubcomp_goes_out_again_after_a_restart(
        disk: Disk) -> None:
    pair = MqttPair(store=disk.store)
    dev, pub = pair.persistent_subscriber("q2/#", 2), pair.client()
    pub.connect("pub")
    pub.publish("q2/a", b"once", qos=2, pid=9)
    pub.ack(codec.PUBREL, 9)
    (msg,) = _publishes(pair.inbox(dev))
    assert dev.ack(codec.PUBREC, msg["pid"]) == [
        {"type": codec.PUBREL, "pid": msg["pid"], "code": 0}]

    pair.crash_and_restart(disk.reopen())  # before the client's PUBCOMP
    back = pair.client()
    back.connect("dev", clean=False)
    assert pair.inbox(back) == [{"type": codec.PUBREL, "pid": msg["pid"], "code": 0}]
    assert back.ack(codec.PUBCOMP, msg["pid"]) == []


def test_retained_messages_outlive_a_restart_and_a_cleared_one_stays_cleared(
        disk: Disk) -> None:
    pair = MqttPair(store=disk.store)
    pub = pair.client()
    pub.connect("pub")
    pub.publish("plant/a", b"kept", qos=1, pid=1, retain=True)
    pub.publish("plant/b", b"gone", qos=1, pid=2, retain=True)
    pub.publish("plant/b", b"", qos=1, pid=3, retain=True)  # clears plant/b's

    pair.crash_and_restart(disk.reopen())
    sub = pair.client()
    sub.connect("sub")
    got = _publishes(sub.subscribe(1, ("plant/#", 1)))
    assert [(p["topic"], p["payload"], p["retain"]) for p in got] == [
        ("plant/a", b"kept", True)]


def test_the_session_expiry_clock_runs_on_across_a_restart(disk: Disk) -> None:
    pair = MqttPair(store=disk.store)
    dev = pair.client(5)
    dev.connect("dev", clean=False, props={"session_expiry_interval": 60})
    dev.subscribe(1, ("plant/#", 1))
    dev.session.connection_lost()
    pair.clock.advance(40_000)

    pair.crash_and_restart(disk.reopen())
    pair.clock.advance(21_000)  # 61 s after the connection ended
    pair.hub.process(pair.clock())
    back = pair.client(5)
    assert back.connect("dev", clean=False,
                        props={"session_expiry_interval": 60})["present"] is False
    assert pair.broker.subscription_names() == []  # its durable subscription went too


def test_a_session_connected_when_the_broker_died_expires_its_interval_after_the_restart(
        disk: Disk) -> None:
    pair = MqttPair(store=disk.store)
    dev = pair.client(5)
    dev.connect("dev", clean=False, props={"session_expiry_interval": 60})
    dev.subscribe(1, ("plant/#", 1))
    pair.clock.advance(300_000)  # connected for longer than its expiry

    pair.crash_and_restart(disk.reopen())
    pair.clock.advance(59_000)
    pair.hub.process(pair.clock())
    assert "dev" in pair.hub.sessions
    pair.clock.advance(2_000)
    pair.hub.process(pair.clock())
    assert "dev" not in pair.hub.sessions


def test_sessions_that_end_with_their_connection_leave_no_record(disk: Disk) -> None:
    pair = MqttPair(store=disk.store)
    clean = pair.client()
    clean.connect("clean")
    clean.subscribe(1, ("plant/#", 1))
    clean.session.connection_lost()
    kept = pair.client()
    kept.connect("kept", clean=False)
    kept.session.connection_lost()
    assert set(disk.store.load_state(SESSIONS)) == {"kept"}
    again = pair.client()
    again.connect("kept", clean=True)  # a clean start ends the stored session
    again.session.connection_lost()
    assert disk.store.load_state(SESSIONS) == {}


def test_an_unreadable_session_record_is_dropped_and_its_client_starts_afresh(
        disk: Disk, caplog: pytest.LogCaptureFixture) -> None:
    pair = MqttPair(store=disk.store)
    disk.store.put_state(SESSIONS, "dev", b"{not json")
    disk.store.commit()

    pair.crash_and_restart(disk.reopen())
    assert "MQTT session 'dev' in the store cannot be read" in caplog.text
    assert disk.store.load_state(SESSIONS) == {}
    dev = pair.client()
    assert dev.connect("dev", clean=False)["present"] is False
