"""JMS 2 asynchronous send over mqtt:// (``send(..., completion_listener=...)``).

The transport keeps up to ``send_window`` PUBLISHes in flight and reports each outcome
after the broker's PUBACK, in send order. Against the real brokers: every message arrives,
completions come in send order (QoS 0 and 1 mixed), a small window still completes, and
closing the session waits for the outstanding completions. Against a scripted MQTT 5
server (the only way to make a broker refuse single PUBACKs and then drop the line at a
chosen moment): a refused PUBACK fails that send only, and a dropped connection fails
every send still waiting, in order, and frees the window.
"""

from __future__ import annotations

import socket
import struct
import threading
import uuid
from typing import Any

import mqtt_support
import pytest
from mqtt_support import MqttTarget

from jmspy import ConnectionFactory, DeliveryMode, JMSException, Session

WAIT = 20.0
mqtt_target = mqtt_support.mqtt_target


class _Completions:
    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen: list[tuple[str | None, Exception | None]] = []
        self.threads: set[str] = set()
        self.all = threading.Event()

    def __call__(self, message: Any, error: Exception | None) -> None:
        self.seen.append((message.message_id, error))
        self.threads.add(threading.current_thread().name)
        if len(self.seen) >= self.expected:
            self.all.set()


@pytest.mark.parametrize("window", [100, 3])
def test_async_sends_arrive_and_complete_in_send_order(
    mqtt_target: MqttTarget, window: int
) -> None:
    count = 300
    conn = mqtt_target.factory(f"send_window={window}").create_connection()
    try:
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        topic = session.create_topic(f"interop.async.{uuid.uuid4().hex[:10]}")
        consumer = session.create_consumer(topic)
        conn.start()
        producer = session.create_producer(topic)
        done = _Completions(count)
        sent: list[str | None] = []
        paho = conn._transport.paho
        assert paho.max_inflight_messages == 0  # the window is jmspy's, not paho's cap
        peak = 0
        for i in range(count):
            message = session.create_text_message(f"m{i}")
            mode = DeliveryMode.NON_PERSISTENT if i % 7 == 3 else DeliveryMode.PERSISTENT
            producer.send(message, delivery_mode=mode, completion_listener=done)
            sent.append(message.message_id)
            peak = max(peak, paho._inflight_messages)  # QoS 1 PUBLISHes without PUBACK
        assert 0 < peak <= window
        assert done.all.wait(WAIT), f"only {len(done.seen)} of {count} completions"
        assert [mid for mid, _ in done.seen] == sent
        assert [err for _, err in done.seen if err is not None] == []
        assert not any(name.startswith("paho") for name in done.threads)
        got = set()
        while len(got) < count:
            m = consumer.receive(WAIT)
            assert m is not None, f"only {len(got)} of {count} messages arrived"
            got.add(m.text)
        assert got == {f"m{i}" for i in range(count)}
    finally:
        conn.close()


def test_pipelined_sends_keep_pahos_in_flight_cap(mqtt_target: MqttTarget) -> None:
    """sync_send=false: a persistent send returns once paho has the PUBLISH, so paho's own
    cap (send_window) is what bounds the PUBLISHes in flight."""
    with mqtt_target.factory("sync_send=false&send_window=7").create_connection() as conn:
        assert conn._transport.paho.max_inflight_messages == 7
    with mqtt_target.factory().create_connection() as conn:
        assert conn._transport.paho.max_inflight_messages == 0


def test_closing_the_session_waits_for_outstanding_completions(mqtt_target: MqttTarget) -> None:
    count = 200
    conn = mqtt_target.factory().create_connection()
    try:
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        producer = session.create_producer(
            session.create_topic(f"interop.async.{uuid.uuid4().hex[:10]}")
        )
        done = _Completions(count)
        for i in range(count):
            producer.send(session.create_text_message(f"m{i}"), completion_listener=done)
        session.close()
        assert len(done.seen) == count
        assert all(err is None for _, err in done.seen)
    finally:
        conn.close()


def test_bad_send_window_is_refused_with_the_fix(mqtt_target: MqttTarget) -> None:
    from jmspy.errors import InvalidConfigurationException

    with pytest.raises(InvalidConfigurationException,
                       match=r"send_window='0'.*at least 1 and at most 65535"):
        mqtt_target.factory("send_window=0").create_connection()


# -- a scripted MQTT 5 server ----------------------------------------------------------------
class _ScriptedBroker:
    """Accepts one MQTT 5 client: CONNACK, SUBACK nothing; PUBACKs the first ``acked``
    PUBLISHes (reason 0x87 "not authorized" for every second one), then closes the
    connection once ``total`` PUBLISHes have arrived."""

    def __init__(self, acked: int, total: int) -> None:
        self.acked, self.total = acked, total
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @staticmethod
    def _read_packet(conn: socket.socket) -> tuple[int, bytes]:
        head = conn.recv(1, socket.MSG_WAITALL)
        if not head:
            raise EOFError
        length, shift = 0, 0
        while True:
            byte = conn.recv(1, socket.MSG_WAITALL)[0]
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        body = conn.recv(length, socket.MSG_WAITALL) if length else b""
        return head[0], body

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            self._read_packet(conn)  # CONNECT
            conn.sendall(b"\x20\x03\x00\x00\x00")  # CONNACK v5: success, no properties
            publishes = 0
            try:
                while publishes < self.total:
                    kind, body = self._read_packet(conn)
                    if kind >> 4 != 3:  # not a PUBLISH
                        continue
                    publishes += 1
                    topic_len = struct.unpack("!H", body[:2])[0]
                    mid = body[2 + topic_len : 4 + topic_len]
                    if publishes <= self.acked:
                        reason = b"\x87" if publishes % 2 == 0 else b"\x00"
                        conn.sendall(b"\x40\x04" + mid + reason + b"\x00")
            except EOFError:
                pass
        self.server.close()


def test_refused_pubacks_and_a_dropped_connection_fail_those_sends_in_order() -> None:
    broker = _ScriptedBroker(acked=6, total=10)
    conn = ConnectionFactory(
        f"mqtt://127.0.0.1:{broker.port}?version=5&send_window=10", imqReconnectEnabled=False
    ).create_connection()
    try:
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        producer = session.create_producer(session.create_topic("scripted.async"))
        done = _Completions(10)
        sent = []
        for i in range(10):
            message = session.create_text_message(f"m{i}")
            producer.send(message, completion_listener=done)
            sent.append(message.message_id)
        assert done.all.wait(WAIT), f"only {len(done.seen)} of 10 completions"
        assert [mid for mid, _ in done.seen] == sent
        errors = [err for _, err in done.seen]
        # PUBACKs 1..6: the 2nd, 4th and 6th refused (0x87); 7..10 never acknowledged
        for i in (0, 2, 4):
            assert errors[i] is None
        for i in (1, 3, 5):
            assert isinstance(errors[i], JMSException)
            assert "refused" in str(errors[i]) and "Not authorized" in str(errors[i])
            assert str(sent[i]) in str(errors[i])
        for i in range(6, 10):
            assert isinstance(errors[i], JMSException)
            assert "dropped" in str(errors[i]) and str(sent[i]) in str(errors[i])
        transport: Any = conn._transport
        assert transport.outbound.free_places == 10  # every place in the window came back
    finally:
        conn.close()
