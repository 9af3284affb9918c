"""Failover: the broker goes away (and comes back) under a live connection.

Each test restarts a real broker process on the same port: the bundled broker
(``python -m jmspy broker``, in-memory, so only messages sent after the restart exist),
Mosquitto (mqtt://, no persistence: the subscription is re-created) and ActiveMQ 5
(KahaDB keeps persistent messages, so unacknowledged ones come back marked redelivered).
Never skipped: a broker that cannot start fails the test. The restartable brokers'
fixtures live in restartable.py (registered by conftest.py).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from brokers import HOST, free_port
from restartable import RestartableActiveMQ, RestartableMosquitto

from jmspy import ConnectionFactory, JMSException, Session
from jmspy.errors import TransactionRolledBackException

FAST = {"imqReconnectEnabled": True, "imqReconnectInterval": 200, "imqReconnectAttempts": 40}


class JmspyBroker:
    """``python -m jmspy broker`` as a subprocess that can be stopped and started again."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"stomp://{HOST}:{self.port}"

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jmspy", "broker", "--host", HOST,
                 "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.log.read_text(errors="replace")[-2000:]
                pytest.fail(f"jmspy broker exited ({self.proc.returncode}): {err}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        pytest.fail(f"jmspy broker did not listen on {HOST}:{self.port} within 20s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


@pytest.fixture
def jmspy_broker(tmp_path: Path) -> Iterator[JmspyBroker]:
    broker = JmspyBroker(tmp_path / "broker.log")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


class Events:
    """An exception listener that records error codes and lets a test wait for one."""

    def __init__(self) -> None:
        self.codes: list[str] = []
        self.errors: list[JMSException] = []
        self._cond = threading.Condition()

    def __call__(self, error: JMSException) -> None:
        with self._cond:
            self.codes.append(error.error_code)
            self.errors.append(error)
            self._cond.notify_all()

    def wait_for(self, code: str, timeout: float = 20.0) -> JMSException:
        with self._cond:
            ok = self._cond.wait_for(lambda: code in self.codes, timeout)
        assert ok, f"no {code} within {timeout}s; heard {self.codes}"
        return self.errors[self.codes.index(code)]


def _collect(n: int, timeout: float = 20.0) -> tuple[Callable[[Any], None], list[Any],
                                                        threading.Event]:
    got: list[Any] = []
    done = threading.Event()

    def on_message(message: Any) -> None:
        got.append(message)
        if len(got) >= n:
            done.set()

    return on_message, got, done


# -- the bundled broker ----------------------------------------------------------------------
def test_jmspy_broker_restart_listener_keeps_receiving(jmspy_broker: JmspyBroker) -> None:
    events = Events()
    conn = ConnectionFactory(jmspy_broker.url, **FAST).create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        queue = session.create_queue("failover.listener")
        on_message, got, done = _collect(4)
        session.create_consumer(queue).set_message_listener(on_message)
        conn.start()
        producer = session.create_producer(queue)
        producer.send(session.create_text_message("before"))
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [m.text for m in got] == ["before"]

        jmspy_broker.stop()
        interrupted = events.wait_for("CONNECTION_INTERRUPTED")
        assert "reconnecting" in str(interrupted)
        jmspy_broker.start()
        events.wait_for("CONNECTION_RESUMED")
        for i in range(3):  # (a send made during the outage would block until here)
            producer.send(session.create_text_message(f"after-{i}"))
        assert done.wait(20), [m.text for m in got]
        assert [m.text for m in got] == ["before", "after-0", "after-1", "after-2"]
        assert "CONNECTION_LOST" not in events.codes
    finally:
        conn.close()


def test_jmspy_broker_send_during_outage_waits_for_reconnect(jmspy_broker: JmspyBroker) -> None:
    events = Events()
    conn = ConnectionFactory(jmspy_broker.url, **FAST).create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.CLIENT_ACKNOWLEDGE)
        queue = session.create_queue("failover.outage")
        consumer = session.create_consumer(queue)
        conn.start()
        producer = session.create_producer(queue)
        jmspy_broker.stop()
        events.wait_for("CONNECTION_INTERRUPTED")
        threading.Timer(0.5, jmspy_broker.start).start()
        producer.send(session.create_text_message("sent while down"))  # blocks, then sends
        message = consumer.receive(10)
        assert message is not None and message.text == "sent while down"
        message.acknowledge()
    finally:
        conn.close()


def test_jmspy_broker_dead_tags_and_lost_transaction(jmspy_broker: JmspyBroker) -> None:
    events = Events()
    conn = ConnectionFactory(jmspy_broker.url, imqConsumerFlowLimit=10, **FAST).create_connection()
    try:
        conn.set_exception_listener(events)
        client = conn.create_session(False, Session.CLIENT_ACKNOWLEDGE)
        tx = conn.create_session(True)
        queue = client.create_queue("failover.dead")
        consumer = client.create_consumer(queue)
        tx_queue = tx.create_queue("failover.tx")
        tx_consumer = tx.create_consumer(tx_queue)
        conn.start()
        producer = client.create_producer(queue)
        for i in range(5):
            producer.send(client.create_text_message(f"m{i}"))
        client.create_producer(tx_queue).send(client.create_text_message("t"))
        taken = consumer.receive(5)
        assert taken is not None
        assert tx_consumer.receive(5) is not None
        deadline = time.monotonic() + 5
        while consumer.flow_stats().buffered < 4 and time.monotonic() < deadline:
            time.sleep(0.02)

        jmspy_broker.stop()
        events.wait_for("CONNECTION_INTERRUPTED")
        stats = consumer.flow_stats()
        assert (stats.buffered, stats.unconsumed, stats.outstanding_credit) == (0, 0, 0)
        taken.acknowledge()  # a dead tag: a no-op, not an error
        jmspy_broker.start()
        events.wait_for("CONNECTION_RESUMED")
        assert consumer.flow_stats().outstanding_credit == 10
        with pytest.raises(TransactionRolledBackException, match="interrupted"):
            tx.commit()
        tx.commit()  # the next transaction is a fresh one
        producer.send(client.create_text_message("new"))
        message = consumer.receive(10)
        assert message is not None and message.text == "new"
        message.acknowledge()
    finally:
        conn.close()


def test_reconnect_disabled_reports_connection_lost(jmspy_broker: JmspyBroker) -> None:
    events = Events()
    conn = ConnectionFactory(jmspy_broker.url).create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        queue = session.create_queue("failover.off")
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        conn.start()
        jmspy_broker.stop()
        lost = events.wait_for("CONNECTION_LOST")
        assert f"{HOST}:{jmspy_broker.port}" in str(lost)
        assert consumer.receive(0.2) is None
        with pytest.raises(JMSException, match=f"{HOST}:{jmspy_broker.port}"):
            producer.send(session.create_text_message("nowhere"))
        assert events.codes.count("CONNECTION_LOST") == 1
    finally:
        conn.close()


def test_reconnect_gives_up_after_attempts(jmspy_broker: JmspyBroker) -> None:
    events = Events()
    conn = ConnectionFactory(
        jmspy_broker.url, imqReconnectEnabled=True, imqReconnectInterval=50,
        imqReconnectAttempts=2,
    ).create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        producer = session.create_producer(session.create_queue("failover.giveup"))
        jmspy_broker.stop()
        events.wait_for("CONNECTION_INTERRUPTED")
        with pytest.raises(JMSException, match=f"{HOST}:{jmspy_broker.port}"):
            producer.send(session.create_text_message("nowhere"))  # waits for the verdict
        lost = events.wait_for("CONNECTION_LOST")
        assert "2 reconnect attempts" in str(lost)
    finally:
        conn.close()


def test_broker_not_running_names_host_and_port() -> None:
    port = free_port()
    with pytest.raises(JMSException, match=f"{HOST}:{port}"):
        ConnectionFactory(f"stomp://{HOST}:{port}", **FAST).create_connection()


# -- ActiveMQ 5 (persistent: unacknowledged messages survive the restart) ---------------
def test_activemq_restart_redelivers_unacked(restartable_activemq: RestartableActiveMQ) -> None:
    amq = restartable_activemq
    events = Events()
    url = f"stomp://{amq.host}:{amq.stomp_port}"
    # limit 2: only the two received messages are dispatched before the restart
    conn = ConnectionFactory(url, imqConsumerFlowLimit=2, **FAST).create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.CLIENT_ACKNOWLEDGE)
        queue = session.create_queue("failover.amq")
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)  # PERSISTENT by default
        for i in range(5):
            producer.send(session.create_text_message(f"m{i}"))
        conn.start()
        first = [consumer.receive(10) for _ in range(2)]
        assert [m.text for m in first if m is not None] == ["m0", "m1"]

        amq.stop()
        events.wait_for("CONNECTION_INTERRUPTED")
        first[-1].acknowledge()  # type: ignore[union-attr]  # dead tags: a no-op
        amq.start()
        events.wait_for("CONNECTION_RESUMED", timeout=60)
        got: list[Any] = []
        for _ in range(5):
            message = consumer.receive(15)
            assert message is not None, [m.text for m in got]
            got.append(message)
            message.acknowledge()
        assert [m.text for m in got] == ["m0", "m1", "m2", "m3", "m4"]
        assert [m.redelivered for m in got] == [True, True, False, False, False]
        assert consumer.receive(0.3) is None
    finally:
        conn.close()


# -- Mosquitto (mqtt://) ----------------------------------------------------------------------
def test_mosquitto_restart_listener_keeps_working(
    restartable_mosquitto: RestartableMosquitto,
) -> None:
    mq = restartable_mosquitto
    events = Events()
    url = f"mqtt://{mq.host}:{mq.port}"
    conn = ConnectionFactory(url, **FAST).create_connection(client_id="jmspy-failover")
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        topic = session.create_topic("failover/mqtt")
        on_message, got, done = _collect(4)
        session.create_consumer(topic).set_message_listener(on_message)
        conn.start()
        producer = session.create_producer(topic)  # PERSISTENT: QoS 1
        producer.send(session.create_text_message("before"))
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [m.text for m in got] == ["before"]

        mq.stop()
        events.wait_for("CONNECTION_INTERRUPTED")
        mq.start()
        events.wait_for("CONNECTION_RESUMED")
        for i in range(3):
            producer.send(session.create_text_message(f"after-{i}"))
        assert done.wait(20), [m.text for m in got]
        assert [m.text for m in got] == ["before", "after-0", "after-1", "after-2"]
    finally:
        conn.close()


def test_mosquitto_reconnect_disabled(restartable_mosquitto: RestartableMosquitto) -> None:
    mq = restartable_mosquitto
    events = Events()
    conn = ConnectionFactory(f"mqtt://{mq.host}:{mq.port}").create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        topic = session.create_topic("failover/off")
        consumer = session.create_consumer(topic)
        producer = session.create_producer(topic)
        conn.start()
        mq.stop()
        lost = events.wait_for("CONNECTION_LOST")
        assert f"{HOST}:{mq.port}" in str(lost)
        assert consumer.receive(0.2) is None
        with pytest.raises(JMSException, match=f"{HOST}:{mq.port}"):
            producer.send(session.create_text_message("nowhere"))
    finally:
        conn.close()
