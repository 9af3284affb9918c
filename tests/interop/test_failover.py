"""Failover: the broker goes away (and comes back) under a live connection.

test_restart_resumes_listener_and_returns_unacked restarts every broker once, covering
each of the 7 targets (vm://, STOMP to the bundled broker -- on its store and
``--in-memory`` --, ActiveMQ 5 and RabbitMQ, MQTT
to Mosquitto, ActiveMQ 5 and RabbitMQ) on the same port or name, and checks what
docs/transports.md (Failover) says each does with unacknowledged messages. The other
tests pin single behaviours (reconnect off, giving up, sends during an outage, lost
transactions, prefetch-bounded redelivery) on the cheapest broker that shows them.
Never skipped: a broker that cannot start fails the test. The restartable brokers'
fixtures live in restartable.py (registered by conftest.py).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from brokers import HOST, ActiveMQ, Mosquitto, RabbitMQ, free_port
from jmspy_process import JmspyBroker
from recording import Events

from jmspy import ConnectionFactory, JMSException, Session, reconnect
from jmspy.destinations import Destination
from jmspy.errors import TransactionRolledBackException

FAST = {"imqReconnectEnabled": True, "imqReconnectInterval": 200, "imqReconnectAttempts": 90}


@pytest.fixture(autouse=True)
def _prompt_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cap the doubling backoff at 1 s here. Its shape is test_reconnect_policy.py's
    business; in a restart test the doubling (up to 30 s) would only add idle waiting
    after a broker that took 10 s to start is back, about as long again."""
    monkeypatch.setattr(reconnect, "MAX_INTERVAL", 1.0)


@pytest.fixture
def jmspy_broker(tmp_path: Path) -> Iterator[JmspyBroker]:
    broker = JmspyBroker(tmp_path / "broker.log")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def _collect(n: int, timeout: float = 20.0) -> tuple[Callable[[Any], None], list[Any],
                                                        threading.Event]:
    got: list[Any] = []
    done = threading.Event()

    def on_message(message: Any) -> None:
        got.append(message)
        if len(got) >= n:
            done.set()

    return on_message, got, done


# -- all 7 targets: one restart per broker ---------------------------------------------------
@dataclass
class Target:
    """One URL of a broker that the test stops and starts again."""

    url: str
    #: unacknowledged messages survive the restart and come back
    persists: bool
    #: the broker flags what it redelivers after a restart (MQTT: the DUP flag)
    marks_redelivered: bool = True

    @property
    def mqtt(self) -> bool:
        """mqtt://, or mqtts:// (test_tls_failover.py's targets)."""
        return self.url.split(":", 1)[0] in ("mqtt", "mqtts", "mqtt+ssl")


@dataclass
class Restart:
    """A broker and the targets it serves: ActiveMQ and RabbitMQ serve STOMP and MQTT
    through one restart (RabbitMQ takes 6-10 s to start; restarting it once per protocol
    would double that)."""

    targets: list[Target]
    stop: Callable[[], None]
    start: Callable[[], None]


def _vm_restart(stored: bool) -> Iterator[Restart]:
    """The in-process broker, stopped and started again under the same name. With a
    MemoryStore kept across the restart (what a crash-safe store would keep), the new
    broker recovers persistent messages and delivery counts; without one it is empty."""
    from jmspy.broker_ref.store.store import MemoryStore
    from jmspy.transports import vm

    name, store = f"failover-{uuid.uuid4().hex[:8]}", MemoryStore() if stored else None
    vm.start_broker(name, store=store)
    try:
        yield Restart([Target(f"vm://{name}", persists=stored)], lambda: vm.stop_broker(name),
                      lambda: vm.start_broker(name, store=store) and None)
    finally:
        vm.stop_broker(name)


BROKERS = ["vm", "vm-volatile", "jmspy", "jmspy-in-memory", "activemq", "rabbitmq",
           "mosquitto", "mosquitto-volatile"]


@pytest.fixture(params=BROKERS)
def restart(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Restart]:
    name: str = request.param
    if name.startswith("vm"):
        yield from _vm_restart(stored=name == "vm")
    elif name.startswith("jmspy"):  # on its store (the default), or --in-memory
        stored = name == "jmspy"
        b = JmspyBroker(tmp_path / "broker.log",
                        data_dir=tmp_path / "store" if stored else None)
        b.start()
        try:
            yield Restart([Target(b.url, persists=stored)], b.stop, b.start)
        finally:
            b.stop()
    elif name.startswith("mosquitto"):
        volatile = name.endswith("volatile")
        m: Mosquitto = request.getfixturevalue(
            "restartable_mosquitto" if volatile else "persistent_mosquitto"
        )
        yield Restart([Target(f"mqtt://{m.host}:{m.mqtt_port}", persists=not volatile)],
                      m.stop, m.start)
    else:
        r: ActiveMQ | RabbitMQ = request.getfixturevalue(f"restartable_{name}")
        yield Restart(
            [Target(f"stomp://{r.host}:{r.stomp_port}", persists=True),
             Target(f"mqtt://{r.host}:{r.mqtt_port}", persists=True,
                    marks_redelivered=name != "activemq")],
            r.stop, r.start,
        )


class FailoverClient:
    """One connection to one target: a listener (AUTO_ACKNOWLEDGE) and a consumer that
    holds three received messages unacknowledged (CLIENT_ACKNOWLEDGE) across the restart
    (or, in test_tls_failover.py, across a severed connection)."""

    def __init__(self, target: Target) -> None:
        self.target, self.events = target, Events()
        run = uuid.uuid4().hex[:8]
        # MQTT: a client id asks for a persistent session (clean start off, never expires)
        self.conn = ConnectionFactory(target.url, **FAST).create_connection(
            client_id=f"jmspy-fo-{run}" if target.mqtt else None
        )
        self.conn.set_exception_listener(self.events)
        self.listening = self.conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        self.holding = self.conn.create_session(False, Session.CLIENT_ACKNOWLEDGE)
        make = self.listening.create_topic if target.mqtt else self.listening.create_queue
        listen, held = make(f"failover.{run}.listen"), make(f"failover.{run}.held")
        self.on_message, self.got, self.done = _collect(4)
        self.listening.create_consumer(listen).set_message_listener(self.on_message)
        self.holder = self.holding.create_consumer(held)
        self.to_listener = self.listening.create_producer(listen)  # PERSISTENT (QoS 1)
        self.to_holder = self.holding.create_producer(held)

    def before(self) -> None:
        self.conn.start()
        self.to_listener.send(self.listening.create_text_message("before"))
        deadline = time.monotonic() + 10
        while not self.got and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [m.text for m in self.got] == ["before"], self.target
        for i in range(3):
            self.to_holder.send(self.holding.create_text_message(f"held-{i}"))
        self.taken = [self.holder.receive(10) for _ in range(3)]
        assert [m.text if m else None for m in self.taken] == ["held-0", "held-1", "held-2"]

    def after(self) -> None:
        for i in range(3):
            self.to_listener.send(self.listening.create_text_message(f"after-{i}"))
        assert self.done.wait(20), (self.target, [m.text for m in self.got])
        assert [m.text for m in self.got] == ["before", "after-0", "after-1", "after-2"]
        persists = self.target.persists
        back = []
        for _ in range(3 if persists else 1):
            message = self.holder.receive(15 if persists else 1)
            if message is None:
                break
            back.append(message)
        if persists:
            assert sorted(m.text for m in back) == ["held-0", "held-1", "held-2"], self.target
            flags = [m.redelivered for m in back]
            assert flags == [self.target.marks_redelivered] * 3, (self.target, flags)
            back[-1].acknowledge()
        else:
            assert back == [], (self.target, [m.text for m in back])
        assert self.holder.receive(0.3) is None
        assert self.events.codes == ["CONNECTION_INTERRUPTED", "CONNECTION_RESUMED"]


def test_restart_resumes_listener_and_returns_unacked(restart: Restart) -> None:
    """Across one broker restart, on every target: the exception listener hears
    CONNECTION_INTERRUPTED then CONNECTION_RESUMED (nothing else); a message listener
    receives what is sent after the restart; and three messages received but not
    acknowledged before it (an acknowledge() during the outage is a no-op: their delivery
    tags died) either all come back, none lost, or -- where the broker keeps nothing --
    are gone.

    Who keeps them, marked JMSRedelivered: the vm broker started again on its store,
    the bundled broker killed (SIGKILL) and started again on its data directory,
    ActiveMQ over STOMP (KahaDB, persistJMSRedelivered), RabbitMQ over STOMP and MQTT
    (durable queues; the MQTT session of a client id is one), Mosquitto with
    ``persistence true`` (saved when it stops, DUP set on the resend). ActiveMQ over MQTT
    returns them *unmarked*: it sets DUP only from an in-memory table of the packet ids
    it handed out, which a restart empties, and MQTT 3.1.1 carries no message id by which
    jmspy could tell. Who keeps nothing: the vm broker without a store, the bundled
    broker run ``--in-memory`` and Mosquitto without persistence (a restart
    forgets every session).
    """
    clients = [FailoverClient(target) for target in restart.targets]
    try:
        for client in clients:
            client.before()
        time.sleep(0.3)  # the listeners' acknowledgements reach the broker
        restart.stop()
        for client in clients:
            client.events.wait_for("CONNECTION_INTERRUPTED")
            client.taken[-1].acknowledge()  # type: ignore[union-attr]  # dead tags: no-op
        restart.start()
        for client in clients:
            client.events.wait_for("CONNECTION_RESUMED", timeout=60)
        for client in clients:
            client.after()
    finally:
        for client in clients:
            client.conn.close()


# -- the bundled broker ---------------------------------------------------------------------
def test_jmspy_broker_send_during_outage_waits_for_reconnect(jmspy_broker: JmspyBroker) -> None:
    events = Events()
    # The client may reconnect before the restarting thread has seen the port open: the
    # test joins it, or the fixture's stop() could run under its feet.
    restarter = threading.Timer(0.5, jmspy_broker.start)
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
        restarter.start()
        producer.send(session.create_text_message("sent while down"))  # blocks, then sends
        message = consumer.receive(10)
        assert message is not None and message.text == "sent while down"
        message.acknowledge()
    finally:
        conn.close()
        if restarter.is_alive():
            restarter.join(30)


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


def test_a_transaction_of_a_dropped_stomp_connection_is_never_sent_to_the_new_one(
        jmspy_broker: JmspyBroker) -> None:
    """A commit, send or rollback that raced the reconnect still names the transaction
    begun on the dropped connection: the broker forgot it with that connection, so the
    commit fails here (the caller rolls back), the send is not published, the rollback is
    a no-op, and the new connection hears none of them (no ERROR for an unknown
    transaction, which RabbitMQ and ActiveMQ send)."""
    events = Events()
    conn = ConnectionFactory(jmspy_broker.url, **FAST).create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        queue = session.create_queue("failover.stale-tx")
        transport = conn._transport
        transport.begin("tx-stale")
        jmspy_broker.stop()
        events.wait_for("CONNECTION_INTERRUPTED")
        jmspy_broker.start()
        events.wait_for("CONNECTION_RESUMED")
        stale = session.create_text_message("lost with its transaction")
        stale.destination, stale.message_id = queue, "ID:stale-1"  # as a producer sets them
        transport.send(stale, "tx-stale")
        with pytest.raises(JMSException, match="since dropped") as refused:
            transport.commit("tx-stale")
        assert refused.value.error_code == "TRANSACTION_LOST"
        transport.rollback("tx-stale")
        consumer = session.create_consumer(queue)
        conn.start()
        session.create_producer(queue).send(session.create_text_message("after"))
        first = consumer.receive(10)
        assert first is not None and first.text == "after"
        assert consumer.receive_no_wait() is None
        assert events.codes == ["CONNECTION_INTERRUPTED", "CONNECTION_RESUMED"]
    finally:
        conn.close()


def _reconnect_off_reports_connection_lost(
        url: str, destination: Callable[[Session], Destination], stop: Callable[[], None],
        port: int) -> Events:
    """With reconnect off, a stopped broker is CONNECTION_LOST naming host:port, for the
    exception listener, a blocked receive() and a send alike; the listener's events."""
    events = Events()
    conn = ConnectionFactory(url).create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        dest = destination(session)
        consumer = session.create_consumer(dest)
        producer = session.create_producer(dest)
        conn.start()
        stop()
        lost = events.wait_for("CONNECTION_LOST")
        assert f"{HOST}:{port}" in str(lost)
        with pytest.raises(JMSException, match=f"{HOST}:{port}") as gone:
            consumer.receive(0.2)  # says why nothing more can come (issue 11, item 10)
        assert gone.value.error_code == "CONNECTION_LOST"
        with pytest.raises(JMSException, match=f"{HOST}:{port}"):
            producer.send(session.create_text_message("nowhere"))
        return events
    finally:
        conn.close()


def test_reconnect_disabled_reports_connection_lost(jmspy_broker: JmspyBroker) -> None:
    events = _reconnect_off_reports_connection_lost(
        jmspy_broker.url, lambda s: s.create_queue("failover.off"), jmspy_broker.stop,
        jmspy_broker.port)
    assert events.codes.count("CONNECTION_LOST") == 1


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
def test_activemq_restart_redelivers_unacked(restartable_activemq: ActiveMQ) -> None:
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
def test_mosquitto_reconnect_disabled(restartable_mosquitto: Mosquitto) -> None:
    mq = restartable_mosquitto
    _reconnect_off_reports_connection_lost(
        f"mqtt://{mq.host}:{mq.mqtt_port}", lambda s: s.create_topic("failover/off"), mq.stop,
        mq.mqtt_port)


# -- vm:// (the in-process broker stopped with stop_broker) -----------------------------------
def test_vm_reconnect_disabled_reports_connection_lost() -> None:
    from jmspy.transports import vm

    name = f"failover-{uuid.uuid4().hex[:8]}"
    vm.start_broker(name)
    events = Events()
    conn = ConnectionFactory(f"vm://{name}").create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        queue = session.create_queue("failover.off")
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        conn.start()
        vm.stop_broker(name)
        lost = events.wait_for("CONNECTION_LOST")
        assert f"vm://{name}" in str(lost) and "imqReconnectEnabled" in str(lost)
        vm.start_broker(name)  # a new broker of that name: this connection stays lost
        with pytest.raises(JMSException, match=f"vm://{name} was stopped") as gone:
            consumer.receive(0.2)  # says why nothing more can come (issue 11, item 10)
        assert gone.value.error_code == "CONNECTION_LOST"
        with pytest.raises(JMSException, match=f"vm://{name} was stopped"):
            producer.send(session.create_text_message("nowhere"))
        assert events.codes == ["CONNECTION_LOST"]
    finally:
        conn.close()
        vm.stop_broker(name)


def test_vm_outage_send_waits_and_transaction_is_lost() -> None:
    """A send during the outage waits for the broker to come back, then goes to it; the
    transaction open when the broker stopped fails its commit; the next one is fresh."""
    from jmspy.transports import vm

    name = f"failover-{uuid.uuid4().hex[:8]}"
    vm.start_broker(name)
    events = Events()
    conn = ConnectionFactory(f"vm://{name}", **FAST).create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.CLIENT_ACKNOWLEDGE)
        tx = conn.create_session(True)
        queue = session.create_queue("failover.vm")
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        tx.create_producer(queue).send(tx.create_text_message("in the lost transaction"))
        conn.start()
        vm.stop_broker(name)
        events.wait_for("CONNECTION_INTERRUPTED")
        restarter = threading.Timer(0.5, vm.start_broker, args=(name,))
        restarter.start()
        producer.send(session.create_text_message("sent while down"))  # blocks, then sends
        message = consumer.receive(10)
        assert message is not None and message.text == "sent while down"
        message.acknowledge()
        with pytest.raises(TransactionRolledBackException, match="interrupted"):
            tx.commit()
        tx.commit()  # the next transaction is a fresh one
        assert consumer.receive(0.3) is None  # the lost transaction's send was discarded
        assert events.codes == ["CONNECTION_INTERRUPTED", "CONNECTION_RESUMED"]
        restarter.join(30)  # started its broker before the client could reconnect
    finally:
        conn.close()
        vm.stop_broker(name)
