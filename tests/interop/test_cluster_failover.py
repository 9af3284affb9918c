"""Chaos on real clusters: SIGKILL of the broker that serves the consumers, while their
listeners are in the middle of a message, and the client moves along its address list.

Three clusters x protocols, one kill each, every ack mode the protocol has at once (one
connection per mode, all on the node that is killed):

* RabbitMQ 3-node cluster over stomp://, a quorum queue per mode declared by the consumer
  (``create_queue("name?x-queue-type=quorum")``) on the first node, which is therefore
  both the node serving the consumers and the queue's leader: AUTO, CLIENT, transacted.
* the same cluster over mqtt://: a durable session per mode (a client id), whose
  subscription RabbitMQ keeps in a quorum queue (``mqtt.durable_queue_type``) on the
  first node: AUTO, CLIENT (MQTT has no transactions).
* ActiveMQ 5 shared-store master/slave over stomp://: the master is killed, the slave
  takes over the KahaDB store: AUTO, CLIENT, transacted.

Each mode's queue holds N persistent messages before its listener starts; each listener
stops inside its HOLD-th message until the node is dead, then returns, so its
acknowledgement (or commit) meets a dead connection, with more messages prefetched behind
it. Outcome asserted per mode: every message delivered; any message delivered again is
marked redelivered (``msg.redelivered`` / JMSXDeliveryCount > 1); the listener resumed on
another node (``conn.where``, CONNECTION_INTERRUPTED then CONNECTION_RESUMED). No time is
asserted: every wait is bounded and fails with what it saw so far.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from brokers import HOST
from clusters import ActiveMQPair, RabbitCluster, stomp_send

from jmspy import ConnectionFactory, JMSException, Session, reconnect

N = 120  # messages per mode
HOLD = 30  # the listener's message during which the node is killed
WAIT = 120.0  # seconds any bounded wait allows (three nodes' worth of work on 2 cores)
#: One attempt per address per pass (imqReconnectAttempts counts attempts at one address
#: before the next is tried: a cluster client should move on at once), many passes.
RECONNECT = {"imqReconnectEnabled": True, "imqReconnectInterval": 200,
             "imqReconnectAttempts": 1, "imqAddressListIterations": 100,
             "imqConsumerFlowLimit": 20}
MODES = {"auto": (False, Session.AUTO_ACKNOWLEDGE),
         "client": (False, Session.CLIENT_ACKNOWLEDGE),
         "transacted": (True, Session.SESSION_TRANSACTED)}


@pytest.fixture(autouse=True)
def _prompt_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cap the doubling reconnect backoff at 1 s (as test_failover.py does): its shape is
    test_reconnect_policy.py's business, and here it would only add idle waiting."""
    monkeypatch.setattr(reconnect, "MAX_INTERVAL", 1.0)


@dataclass
class Heard:
    text: str
    redelivered: bool
    delivery_count: int


@dataclass
class ModeRun:
    """One connection, one session in one ack mode, one listener on one destination."""

    mode: str
    dest_name: str
    killed: threading.Event
    #: the messages its destination holds when the listener starts
    expected: list[str] = field(default_factory=list)
    heard: list[Heard] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    listener_errors: list[str] = field(default_factory=list)
    holding: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    conn: Any = None
    session: Any = None

    def __post_init__(self) -> None:
        self.expected = [f"{self.dest_name}-{i}" for i in range(N)]

    def open(self, factory: ConnectionFactory, make_dest: Callable[[Any, str], Any],
             client_id: str | None = None) -> None:
        transacted, ack = MODES[self.mode]
        self.conn = factory.create_connection(client_id=client_id)
        self.conn.set_exception_listener(self._on_exception)
        self.session = self.conn.create_session(transacted, ack)
        consumer = self.session.create_consumer(make_dest(self.session, self.dest_name))
        consumer.set_message_listener(self._on_message)

    def _on_exception(self, error: JMSException) -> None:
        self.codes.append(error.error_code)

    def _on_message(self, message: Any) -> None:
        self.heard.append(Heard(message.text, bool(message.redelivered),
                                int(message.delivery_count)))
        if len(self.heard) == HOLD:
            self.holding.set()
            self.killed.wait(WAIT)  # the node dies while this message is being handled
        try:
            if self.mode == "client":
                message.acknowledge()
            elif self.mode == "transacted":
                self.session.commit()
        except JMSException as exc:  # the commit that met the kill: rolled back, redelivered
            self.listener_errors.append(f"{type(exc).__name__}: {exc}")
        if len({h.text for h in self.heard}) >= N:
            self.done.set()

    def summary(self) -> str:
        texts = {h.text for h in self.heard}
        return (f"{self.mode}: {len(texts)} of {N} distinct, {len(self.heard)} deliveries, "
                f"events {self.codes}, listener errors {self.listener_errors[:3]}")

    def problems(self, killed_url: str) -> list[str]:
        """What broke the JMS promises: lost messages, unmarked duplicates, no resume."""
        out: list[str] = []
        texts = [h.text for h in self.heard]
        missing = sorted(set(self.expected) - set(texts), key=lambda t: int(t.split("-")[-1]))
        if missing:
            out.append(f"{self.mode}: {len(missing)} of {N} never delivered, "
                       f"e.g. {missing[:5]}")
        seen: set[str] = set()
        unmarked = []
        for h in self.heard:
            if h.text in seen and not (h.redelivered or h.delivery_count > 1):
                unmarked.append(h.text)
            seen.add(h.text)
        if unmarked:
            out.append(f"{self.mode}: {len(unmarked)} duplicates not marked redelivered, "
                       f"e.g. {unmarked[:5]}")
        if self.codes[:1] != ["CONNECTION_INTERRUPTED"] or "CONNECTION_RESUMED" not in self.codes:
            out.append(f"{self.mode}: exception listener heard {self.codes}, expected "
                       "CONNECTION_INTERRUPTED then CONNECTION_RESUMED")
        where = self.conn.where
        if where.rstrip("/") == killed_url.rstrip("/"):
            out.append(f"{self.mode}: conn.where still names the killed broker {where}")
        return out


def _run_chaos(runs: list[ModeRun], kill: Callable[[], None], killed_url: str) -> None:
    """Start the listeners, kill the broker once every one holds its HOLD-th message,
    let them go, wait until each heard every message, and check the outcome."""
    for run in runs:
        run.conn.start()
    try:
        for run in runs:
            assert run.holding.wait(WAIT), (
                f"a listener never reached message {HOLD} before the kill; "
                f"{[r.summary() for r in runs]}")
        kill()
        runs[0].killed.set()  # every run shares the one event: the listeners go on
        for run in runs:
            assert run.done.wait(WAIT), (
                f"not every message arrived within {WAIT:.0f}s after the kill; "
                f"{[r.summary() for r in runs]}")
        time.sleep(1.0)  # a late duplicate (unmarked, or one too many) would arrive now
    finally:
        runs[0].killed.set()
        for run in runs:
            try:
                run.conn.close()
            except JMSException:
                pass
    problems = [p for run in runs for p in run.problems(killed_url)]
    assert not problems, "\n".join(problems + [r.summary() for r in runs])


def _runs(modes: list[str]) -> list[ModeRun]:
    killed, run_id = threading.Event(), uuid.uuid4().hex[:8]
    return [ModeRun(mode, f"chaos-{mode}-{run_id}", killed) for mode in modes]


def test_rabbitmq_cluster_stomp_listeners_survive_their_nodes_kill(
        rabbit_cluster: RabbitCluster) -> None:
    """Quorum queues led by the node the consumers are on; that node is SIGKILLed."""
    first, second = rabbit_cluster.nodes[0], rabbit_cluster.nodes[1]
    factory = ConnectionFactory(",".join(rabbit_cluster.stomp_urls()), **RECONNECT)
    runs = _runs(list(MODES))
    killed_url = f"stomp://{HOST}:{first.stomp_port}"
    for run in runs:
        run.open(factory, lambda s, name: s.create_queue(f"{name}?x-queue-type=quorum"))
        assert run.conn.where.rstrip("/") == killed_url  # PRIORITY: the first address
    for run in runs:
        assert rabbit_cluster.queue_leader(run.dest_name) == first.node
        stomp_send(second.stomp_address, f"/amq/queue/{run.dest_name}", run.expected)
    _run_chaos(runs, lambda: rabbit_cluster.kill(first), killed_url)


def test_rabbitmq_cluster_mqtt_listeners_survive_their_nodes_kill(
        rabbit_cluster: RabbitCluster) -> None:
    """Durable MQTT sessions (quorum queues on the first node); that node is SIGKILLed."""
    first, second = rabbit_cluster.nodes[0], rabbit_cluster.nodes[1]
    factory = ConnectionFactory(",".join(rabbit_cluster.mqtt_urls()), **RECONNECT)
    runs = _runs(["auto", "client"])  # MQTT has no transactions
    killed_url = f"mqtt://{HOST}:{first.mqtt_port}"
    for run in runs:
        run.open(factory, lambda s, name: s.create_topic(name), client_id=run.dest_name)
        assert run.conn.where.rstrip("/") == killed_url
    producer_conn = ConnectionFactory(f"mqtt://{HOST}:{second.mqtt_port}").create_connection()
    try:
        session = producer_conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        for run in runs:
            producer = session.create_producer(session.create_topic(run.dest_name))
            for body in run.expected:  # PERSISTENT: QoS 1, each PUBACKed
                producer.send(session.create_text_message(body))
    finally:
        producer_conn.close()
    _run_chaos(runs, lambda: rabbit_cluster.kill(first), killed_url)


def test_activemq_master_slave_stomp_listeners_survive_the_masters_kill(
        activemq_pair: ActiveMQPair) -> None:
    """The consumers are on the master (the slave's port is closed until it takes
    over); the master is SIGKILLed and the slave serves the store."""
    master = activemq_pair.wait_master()
    factory = ConnectionFactory(",".join(activemq_pair.stomp_urls()), **RECONNECT)
    runs = _runs(list(MODES))
    killed_url = f"stomp://{HOST}:{master.stomp_port}"
    for run in runs:
        run.open(factory, lambda s, name: s.create_queue(name))
        assert run.conn.where.rstrip("/") == killed_url
    assert master.stomp_port is not None
    for run in runs:
        stomp_send((HOST, master.stomp_port), f"/queue/{run.dest_name}", run.expected)
    _run_chaos(runs, master.kill, killed_url)
