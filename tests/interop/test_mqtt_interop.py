"""Behavioural tests of the mqtt:// transport against Mosquitto 2 (MQTT 5), ActiveMQ 5.17 and
RabbitMQ 3.10 (both MQTT 3.1.1, reached through the transport's automatic fallback).

MQTT topics keep nothing for absent subscribers, so every test subscribes before it
publishes. Each test uses its own topic; brokers are session-scoped (conftest.py).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import mqtt_support
import pytest
from brokers import free_port
from capability_probes import Listened, Rig, check_cell, receive_texts
from library_paths import needs_paho_hooks
from mqtt_support import MqttTarget
from polling import wait_until

from jmspy import ConnectionFactory, DeliveryMode, JMSException, Session
from jmspy.capabilities import Feature
from jmspy.errors import JMSSecurityException, UnsupportedFeatureException
from jmspy.message import BytesMessage, MapMessage, TextMessage

WAIT = 10.0
# The fixtures this module uses (conftest.py belongs to the STOMP suite's author).
mqtt_target = mqtt_support.mqtt_target
mosquitto_auth = mqtt_support.mosquitto_auth


def _topic(session: Any, tag: str = "t") -> Any:
    return session.create_topic(f"interop.{tag}.{uuid.uuid4().hex[:10]}")


def _consumer_and_producer(conn: Any, ack_mode: int = Session.AUTO_ACKNOWLEDGE
                           ) -> tuple[Any, Any, Any]:
    """(session, consumer, producer) on a fresh topic, the connection started: MQTT keeps
    nothing for a subscriber that is not there yet, so the consumer comes first."""
    s = conn.create_session(ack_mode=ack_mode)
    t = _topic(s)
    c = s.create_consumer(t)
    conn.start()
    return s, c, s.create_producer(t)


def test_negotiates_the_protocol_version(mqtt_target: MqttTarget) -> None:
    with mqtt_target.factory().create_connection() as conn:
        assert conn._transport.version == mqtt_target.version


def test_send_receive_bodies_and_qos(
    mqtt_target: MqttTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also, on the hooked path: every PUBLISH is decoded by jmspy
    (paho_private/publish_read.py); paho's own decoder is made to fail, so a client still
    using it would lose the messages. The public path is paho's decoder: the same bodies
    and QoS must come out of it."""
    import paho.mqtt._packet as paho_packet

    from jmspy.transports.mqtt import paho_private

    def refuse(*args: Any) -> Any:
        raise AssertionError("paho decoded a PUBLISH: jmspy's decoder is not in place")

    if paho_private.enabled():
        monkeypatch.setattr(paho_packet, "decode_publish", refuse)
    with mqtt_target.factory().create_connection() as conn:
        s, c, p = _consumer_and_producer(conn)
        p.send(s.create_text_message("héllo"))
        p.send(s.create_bytes_message(b"\x00\x01\xff"))
        p.send(s.create_text_message("fire"), delivery_mode=DeliveryMode.NON_PERSISTENT)
        m1 = c.receive(WAIT)
        assert isinstance(m1, TextMessage) and m1.text == "héllo"
        assert m1.destination == p.destination  # the topic it was sent to
        assert m1.delivery_mode == DeliveryMode.PERSISTENT  # QoS 1
        assert not m1.redelivered and m1.delivery_count == 1
        m2 = c.receive(WAIT)
        assert isinstance(m2, BytesMessage) and m2.body == b"\x00\x01\xff"
        m3 = c.receive(WAIT)
        assert m3.text == "fire" and m3.delivery_mode == DeliveryMode.NON_PERSISTENT  # QoS 0


@needs_paho_hooks
def test_publish_and_puback_leave_on_the_thread_that_makes_them(
    mqtt_target: MqttTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """paho_private/direct_write.py: a persistent send's PUBLISH and a receive's PUBACK
    are written by the sending and the acknowledging thread; only the other packets
    (SUBSCRIBE, DISCONNECT...) go through paho's queue to its network thread. And
    (buffered_read.py) paho's byte-at-a-time socket read is never used, nor (puback.py)
    paho's PUBACK decoder for the broker's plain PUBACKs."""
    import paho.mqtt._packet as paho_packet
    import paho.mqtt.client as paho

    from jmspy.transports.mqtt.paho_private import buffered_read, direct_write, puback

    queued: list[int] = []
    pahos_reads: list[int] = []
    original = paho.Client._packet_queue
    original_recv = paho.Client._sock_recv

    def recording(self: Any, command: int, packet: Any, mid: int, qos: int,
                  info: Any = None) -> Any:
        queued.append(command & 0xF0)
        return original(self, command, packet, mid, qos, info)

    def recording_recv(self: Any, bufsize: int) -> Any:
        pahos_reads.append(bufsize)
        return original_recv(self, bufsize)

    monkeypatch.setattr(paho.Client, "_packet_queue", recording)
    monkeypatch.setattr(paho.Client, "_sock_recv", recording_recv)
    pahos_pubacks: list[bytes] = []
    original_puback = paho_packet.decode_puback

    def recording_puback(header: int, packet: Any, protocol: Any) -> Any:
        pahos_pubacks.append(bytes(packet))
        return original_puback(header, packet, protocol)

    monkeypatch.setattr(paho_packet, "decode_puback", recording_puback)
    with mqtt_target.factory().create_connection() as conn:
        client = conn._transport.paho
        assert direct_write.installed(client) and buffered_read.installed(client)
        assert puback.installed(client)
        s, c, p = _consumer_and_producer(conn)
        for n in range(5):
            p.send(s.create_text_message(f"m{n}"))  # PERSISTENT: QoS 1, waits for PUBACK
        assert [c.receive(WAIT).text for _ in range(5)] == [f"m{n}" for n in range(5)]
    assert 0x80 in queued  # SUBSCRIBE took paho's path: the recorder sees that path
    assert 0x30 not in queued and 0x40 not in queued
    assert pahos_reads == []  # CONNACK, SUBACK, PUBACKs, PUBLISHes: all read in blocks
    assert pahos_pubacks == []  # the five PUBACKs: read by puback.py


def test_off_a_tested_paho_release_paho_runs_every_step_itself(
    mqtt_target: MqttTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The public path (transports/mqtt/paho_private: any paho release the tests did not
    run, or JMSPY_LIBRARY_HOOKS=0): no step of jmspy's is set, paho decodes every PUBLISH
    itself, and messages, QoS and acknowledgement are as on the hooked path."""
    import paho.mqtt._packet as paho_packet

    from jmspy.transports.mqtt import paho_private
    from jmspy.transports.mqtt.paho_private import buffered_read, direct_write, puback

    monkeypatch.setattr(paho_private, "enabled", lambda: False)
    decoded: list[int] = []
    original = paho_packet.decode_publish

    def recording(*args: Any) -> Any:
        decoded.append(1)
        return original(*args)

    monkeypatch.setattr(paho_packet, "decode_publish", recording)
    with mqtt_target.factory().create_connection() as conn:
        client = conn._transport.paho
        assert not (direct_write.installed(client) or buffered_read.installed(client)
                    or puback.installed(client))
        s, c, p = _consumer_and_producer(conn, ack_mode=Session.CLIENT_ACKNOWLEDGE)
        # 8: RabbitMQ holds back past 10 unacknowledged QoS 1 messages (mqtt.prefetch)
        for n in range(8):
            p.send(s.create_text_message(f"m{n}"))
        got = [c.receive(WAIT) for _ in range(8)]
        assert [m.text if m else None for m in got] == [f"m{n}" for n in range(8)]
        got[-1].acknowledge()
    assert len(decoded) >= 8


def test_headers_and_properties_survive_on_mqtt5(mqtt_target: MqttTarget) -> None:
    with mqtt_target.factory().create_connection() as conn:
        s, c, p = _consumer_and_producer(conn)
        msg = s.create_text_message("x", properties={"n": 42, "x": 1.5, "ok": True, "s": "a"})
        msg.correlation_id, msg.jms_type = "corr-1", "greeting"
        msg.reply_to = s.create_queue("interop.replies")
        if not mqtt_target.v5:
            with pytest.raises(UnsupportedFeatureException, match=r"mqtt://.*3\.1\.1"):
                p.send(msg)
            with pytest.raises(UnsupportedFeatureException, match="MapMessage"):
                p.send(s.create_map_message({"a": 1}))
            return
        p.send(msg, time_to_live=60)
        p.send(s.create_map_message({"a": 1, "b": "two"}))
        m = c.receive(WAIT)
        assert m.message_id == msg.message_id and m.timestamp == msg.timestamp
        assert m.correlation_id == "corr-1" and m.jms_type == "greeting"
        assert m.reply_to == s.create_queue("interop.replies")
        assert m.properties == {"n": 42, "x": 1.5, "ok": True, "s": "a"}
        assert m.expiration == msg.expiration > 0
        m2 = c.receive(WAIT)
        assert isinstance(m2, MapMessage) and dict(m2.map) == {"a": 1, "b": "two"}


def test_topic_wildcards_map_to_mqtt(mqtt_target: MqttTarget) -> None:
    """'*' -> '+', '#'/'>' -> '#'. Overlapping filters on one connection work on MQTT 5
    (subscription identifiers route each copy) and are refused on 3.1.1."""
    f = mqtt_target.factory()
    with f.create_connection() as conn, f.create_connection() as conn2:
        s = conn.create_session()
        root = f"interop.w{uuid.uuid4().hex[:8]}"
        one = s.create_consumer(s.create_topic(f"{root}.*.price"))
        if mqtt_target.v5:
            rest = s.create_consumer(s.create_topic(f"{root}.>"))
        else:
            with pytest.raises(UnsupportedFeatureException, match=r"overlapping.*mqtt://"):
                s.create_consumer(s.create_topic(f"{root}.#"))
            rest = conn2.create_session().create_consumer(s.create_topic(f"{root}.#"))
        conn.start()
        conn2.start()
        p = s.create_producer()
        for name in ("eu.price", "us.price", "eu.deep.price"):
            p.send(s.create_text_message(name), s.create_topic(f"{root}.{name}"))
        got = [one.receive(WAIT) for _ in range(2)]
        assert [m.text for m in got] == ["eu.price", "us.price"]
        assert got[0].destination == s.create_topic(f"{root}.eu.price")
        assert one.receive(0.3) is None
        assert receive_texts(rest, 3) == ["eu.price", "us.price", "eu.deep.price"]


def test_listener_gets_everything_in_order(mqtt_target: MqttTarget) -> None:
    with mqtt_target.factory().create_connection() as conn:
        s = conn.create_session()
        t = _topic(s)
        listened = Listened(s, t, 30)
        conn.start()
        p = s.create_producer(t)
        for i in range(30):
            p.send(s.create_text_message(str(i)))
        assert listened.done.wait(WAIT)
        assert listened.texts == [str(i) for i in range(30)]


def test_auto_ack_listener_failure_redelivers(mqtt_target: MqttTarget) -> None:
    """MQTT has no NACK: the transport redelivers from its copy (still unacknowledged)."""
    with mqtt_target.factory().create_connection() as conn:
        conn.set_exception_listener(lambda e: None)
        s = conn.create_session()
        t = _topic(s)
        seen: list[tuple[str, bool, int]] = []
        done = threading.Event()

        def on_message(m: Any) -> None:
            seen.append((m.text, m.redelivered, m.delivery_count))
            if len(seen) == 1:
                raise RuntimeError("first attempt fails")
            done.set()

        s.create_consumer(t).set_message_listener(on_message)
        conn.start()
        s.create_producer(t).send(s.create_text_message("once"))
        assert done.wait(WAIT)
        assert seen == [("once", False, 1), ("once", True, 2)]
        assert conn._transport.flow_state()["in_flight"] == 0  # PUBACK went out after all


def test_client_ack_recover_redelivers_in_order(mqtt_target: MqttTarget) -> None:
    with mqtt_target.factory().create_connection() as conn:
        s, c, p = _consumer_and_producer(conn, Session.CLIENT_ACKNOWLEDGE)
        for i in range(6):
            p.send(s.create_text_message(str(i)))
        assert receive_texts(c, 3) == ["0", "1", "2"]
        s.recover()
        again = [c.receive(WAIT) for _ in range(6)]
        assert [m.text for m in again] == [str(i) for i in range(6)]
        assert [m.redelivered for m in again] == [True] * 3 + [False] * 3
        again[-1].acknowledge()
        wait_until(lambda: not conn._transport.flow_state()["in_flight"], WAIT, interval=0.02)
        assert conn._transport.flow_state()["in_flight"] == 0


def test_individual_acks_are_sent_in_receipt_order(mqtt_target: MqttTarget) -> None:
    with mqtt_target.factory().create_connection() as conn:
        s, c, p = _consumer_and_producer(conn, Session.INDIVIDUAL_ACKNOWLEDGE)
        for i in range(3):
            p.send(s.create_text_message(str(i)))
        ms = [c.receive(WAIT) for _ in range(3)]
        ms[2].acknowledge()
        ms[1].acknowledge()
        state = conn._transport.flow_state()
        assert state["in_flight"] == 3  # held: message 0 is not acknowledged yet
        ms[0].acknowledge()
        assert conn._transport.flow_state()["in_flight"] == 0


def test_persistent_session_redelivers_unacked_after_reconnect(
    mqtt_target: MqttTarget,
) -> None:
    """A client id makes the MQTT session persistent: what was delivered but never
    acknowledged comes back when the same client id reconnects (all three brokers)."""
    cid = f"jmspy-durable-{uuid.uuid4().hex[:8]}"
    f = mqtt_target.factory()
    topic_name = f"interop.durable.{uuid.uuid4().hex[:8]}"
    with f.create_connection(client_id=cid) as conn:
        s = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        t = s.create_topic(topic_name)
        c = s.create_durable_consumer(t, "sub1")
        conn.start()
        s.create_producer(t).send(s.create_text_message("keep me"))
        assert c.receive(WAIT).text == "keep me"  # never acknowledged
    with f.create_connection(client_id=cid) as conn:
        s = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        c = s.create_durable_consumer(s.create_topic(topic_name), "sub1")
        conn.start()
        m = c.receive(WAIT)
        assert m is not None and m.text == "keep me"
        if mqtt_target.name != "mqtt-rabbitmq":  # RabbitMQ re-publishes without DUP
            assert m.redelivered
        m.acknowledge()
        c.close()
        s.unsubscribe("sub1")


def test_receive_maximum_bounds_in_flight(mosquitto: Any) -> None:
    """MQTT 5: imqConnectionFlowLimit travels as Receive Maximum. With 50 published and
    none acknowledged, Mosquitto sends exactly 5 and waits. (Once PUBACKs flow, Mosquitto
    2.0.11 overshoots its quota -- measured up to 40 in flight with raw paho too -- so the
    bound the application sees then comes from the client-side stash: the core never
    buffers more than the connection limit.)"""
    url = f"mqtt://{mosquitto.host}:{mosquitto.mqtt_port}"
    f = ConnectionFactory(url, imqConnectionFlowLimitEnabled=True, imqConnectionFlowLimit=5)
    with f.create_connection() as conn, ConnectionFactory(url).create_connection() as pconn:
        s = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        t = _topic(s)
        c = s.create_consumer(t)
        conn.start()
        ps = pconn.create_session()
        p = ps.create_producer(t)
        pconn._transport.sync_send = False  # publish all 50 at once
        for i in range(50):
            p.send(ps.create_text_message(str(i)))
        first = [c.receive(WAIT) for _ in range(5)]
        assert [m.text for m in first] == [str(i) for i in range(5)]
        assert c.receive(0.5) is None  # the sixth is not coming: quota exhausted
        state = conn._transport.flow_state()
        assert state["receive_maximum"] == 5
        assert state["receive_maximum_source"] == "imqConnectionFlowLimit"
        assert state["in_flight"] == state["in_flight_max"] == 5
        first[-1].acknowledge()
        got = [m.text for m in first]
        while len(got) < 50:
            m = c.receive(WAIT)
            assert m is not None, f"stopped after {len(got)}"
            assert conn.flow_stats()["buffered"] <= 5
            got.append(m.text)
            m.acknowledge()
        assert got == [str(i) for i in range(50)]


def test_queue_is_a_shared_subscription_on_mqtt5(mqtt_target: MqttTarget) -> None:
    f = mqtt_target.factory()
    with f.create_connection() as a, f.create_connection() as b:
        sa, sb = a.create_session(), b.create_session()
        q = sa.create_queue(f"interop.q.{uuid.uuid4().hex[:8]}")
        if not mqtt_target.v5:
            with pytest.raises(UnsupportedFeatureException, match=r"Queue.*mqtt://.*3\.1\.1"):
                sa.create_consumer(q)
            return
        ca, cb = sa.create_consumer(q), sb.create_consumer(q)
        a.start()
        b.start()
        p = sa.create_producer(q)
        for i in range(20):
            p.send(sa.create_text_message(str(i)))
        got_a = [m.text for m in iter(lambda: ca.receive(0.5), None)]
        got_b = [m.text for m in iter(lambda: cb.receive(0.5), None)]
        assert sorted(got_a + got_b, key=int) == [str(i) for i in range(20)]
        assert got_a and got_b  # competing consumers, not copies


def test_client_side_selectors(mqtt_target: MqttTarget) -> None:
    """Selectors run in the client; what does not match is acknowledged and dropped.
    On 3.1.1 no properties travel, so only headers (delivery mode <- QoS) can select."""
    with mqtt_target.factory().create_connection() as conn:
        s = conn.create_session()
        t = _topic(s)
        p = s.create_producer(t)
        if mqtt_target.v5:
            c = s.create_consumer(t, selector="region = 'EU' AND qty > 10")
            conn.start()
            for region, qty in [("EU", 5), ("EU", 20), ("US", 50), ("EU", 11)]:
                p.send(
                    s.create_text_message(
                        f"{region}{qty}", properties={"region": region, "qty": qty}
                    )
                )
            assert receive_texts(c, 2) == ["EU20", "EU11"]
        else:
            c = s.create_consumer(t, selector="JMSDeliveryMode = 'PERSISTENT'")
            conn.start()
            for i, mode in enumerate([1, 2, 1, 2]):
                p.send(s.create_text_message(str(i)), delivery_mode=mode)
            assert receive_texts(c, 2) == ["1", "3"]
        assert c.receive(0.3) is None
        assert conn._transport.consumer_state(c.consumer_id)["selector_dropped"] == 2
        assert conn._transport.flow_state()["in_flight"] == 0


@pytest.mark.parametrize("feature", list(Feature), ids=lambda f: f.name.lower())
def test_mqtt_cell_behaves_as_the_matrix_says(mqtt_target: MqttTarget, feature: Feature) -> None:
    """docs/capabilities.md, one cell at a time, on each broker: the column is the protocol
    version the broker negotiates. Refused cells raise the matrix's
    RefusedFeatureException (naming mqtt://, host:port and what to do instead); native and
    emulated cells pass their behavioural probe (tests/capability_probes.py)."""
    rig = Rig("mqtt", mqtt_target.version, mqtt_target.url(), payload_only=not mqtt_target.v5)
    check_cell(rig, feature)


def test_queue_selectors_discard_opt_in(mosquitto: Any) -> None:
    """What the refused queue-selector cell offers instead (MQTT 5: 3.1.1 has no queues):
    with ?queue_selectors=discard a selector on a Queue takes what matches and
    acknowledges (drops) the rest."""
    url = f"mqtt://{mosquitto.host}:{mosquitto.mqtt_port}?queue_selectors=discard"
    with ConnectionFactory(url).create_connection() as conn:
        s = conn.create_session()
        q = s.create_queue(f"interop.qsel.{uuid.uuid4().hex[:10]}")
        c = s.create_consumer(q, "pick = 1")
        conn.start()
        p = s.create_producer(q)
        for i in range(4):
            p.send(s.create_text_message(str(i), properties={"pick": i % 2}))
        assert receive_texts(c, 2) == ["1", "3"]
        assert c.receive(0.3) is None
        assert conn._transport.consumer_state(c.consumer_id)["selector_dropped"] == 2


def test_durable_subscription_needs_a_client_id(mqtt_target: MqttTarget) -> None:
    with mqtt_target.factory().create_connection() as conn:
        s = conn.create_session()
        with pytest.raises(JMSException, match="client id"):
            s.create_durable_consumer(_topic(s), "no-client-id")


def test_slow_listener_does_not_stop_keepalive(mqtt_target: MqttTarget) -> None:
    """The listener sleeps 1.75x the keepalive; paho's thread keeps pinging meanwhile."""
    errors: list[JMSException] = []
    with mqtt_target.factory("keepalive=2").create_connection() as conn:
        conn.set_exception_listener(errors.append)
        s = conn.create_session()
        t = _topic(s)
        listened = Listened(s, t, 2, slow_first=3.5)
        conn.start()
        p = s.create_producer(t)
        p.send(s.create_text_message("slow"))
        time.sleep(3.6)  # outlasts the listener's 3.5 s on "slow", past the 2 s keepalive
        p.send(s.create_text_message("after"))
        assert listened.done.wait(WAIT)
        assert listened.texts == ["slow", "after"] and errors == []
        assert conn._transport._client.is_connected()


def test_broker_not_running_names_host_and_port() -> None:
    port = free_port()
    with pytest.raises(JMSException, match=f"127.0.0.1:{port}"):
        ConnectionFactory(f"mqtt://127.0.0.1:{port}").create_connection()


def test_bad_password_is_a_security_error(
    mosquitto_auth: tuple[str, int, Any],
) -> None:
    host, port, _ = mosquitto_auth
    f = ConnectionFactory(f"mqtt://{host}:{port}")
    with pytest.raises(JMSSecurityException, match="jmspy"):
        f.create_connection("jmspy", "wrong")
    with f.create_connection("jmspy", "secret") as conn:
        assert conn._transport.version == "5"
