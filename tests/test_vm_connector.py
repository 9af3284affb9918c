"""An in-process broker served to other processes over STOMP (``BrokerHost.add_connector``,
ActiveMQ's ``addConnector``): ``vm://`` and ``stomp://`` clients share its queues both
ways, deliveries freed on one side's thread reach the other's, flow control holds across
them, its security applies, and stopping the broker closes the listener."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from polling import wait_until

from jmspy import (
    ConnectionFactory,
    InvalidConfigurationException,
    JMSSecurityException,
    Queue,
    Session,
)
from jmspy.broker_ref.core.security import SecurityPolicy
from jmspy.broker_ref.protocols.stomp.client import fetch_report

WAIT = 10.0  # s: receive() timeouts, generous for a loaded CI machine (never reached)


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _fill(factory: ConnectionFactory, queue: str, count: int) -> None:
    """``count`` messages "0".."count-1" into ``queue`` from a vm:// producer."""
    with factory.create_connection() as vc:
        session = vc.create_session()
        producer = session.create_producer(Queue(queue))
        for i in range(count):
            producer.send(session.create_text_message(str(i)))


def test_vm_and_stomp_clients_share_queues_both_ways_in_order(
        vm_broker_factory: Callable[..., Any]) -> None:
    host, vm_factory = vm_broker_factory()
    url = host.add_connector("stomp://127.0.0.1:0")
    assert url.startswith("stomp://127.0.0.1:") and host.connectors == [url]
    with ConnectionFactory(url).create_connection() as sc, \
            vm_factory.create_connection() as vc:
        sc.start()
        vc.start()
        stomp_session, vm_session = sc.create_session(), vc.create_session()
        # the stomp consumer waits first: each vm send frees a delivery on the vm thread
        inbound = stomp_session.create_consumer(Queue("to-stomp"))
        producer = vm_session.create_producer(Queue("to-stomp"))
        for i in range(500):
            producer.send(vm_session.create_text_message(str(i)))
        assert [inbound.receive(WAIT).text for _ in range(500)] == [str(i) for i in range(500)]

        outbound = stomp_session.create_producer(Queue("to-vm"))
        for i in range(500):
            outbound.send(stomp_session.create_text_message(str(i)))
        consumer = vm_session.create_consumer(Queue("to-vm"))
        assert [consumer.receive(WAIT).text for _ in range(500)] == [str(i) for i in range(500)]
        assert consumer.receive_no_wait() is None and inbound.receive_no_wait() is None
    for name in ("to-stomp", "to-vm"):
        stats = host.stats(name)
        assert (stats["enqueued"], stats["dequeued"], stats["messageCount"]) == (500, 500, 0)


def test_a_stomp_clients_unacknowledged_messages_return_redelivered_when_it_drops(
        vm_broker_factory: Callable[..., Any]) -> None:
    host, vm_factory = vm_broker_factory()
    url = host.add_connector()
    _fill(vm_factory, "work", 10)
    with vm_factory.create_connection() as vc:
        vm_session = vc.create_session()
        sc = ConnectionFactory(url).create_connection()
        sc.start()
        session = sc.create_session(ack_mode=Session.INDIVIDUAL_ACKNOWLEDGE)
        remote = session.create_consumer(Queue("work"))
        received = [remote.receive(WAIT) for _ in range(10)]
        for message in received[:4]:
            message.acknowledge()
        sc.close()  # six delivered, never acknowledged: back to the queue
        vc.start()
        consumer = vm_session.create_consumer(Queue("work"))
        again = [consumer.receive(WAIT) for _ in range(6)]
        assert [m.text for m in again] == [str(i) for i in range(4, 10)]
        assert all(m.redelivered for m in again)
        assert consumer.receive_no_wait() is None


def test_a_vm_producer_held_by_flow_control_resumes_when_a_stomp_consumer_drains(
        vm_broker_factory: Callable[..., Any]) -> None:
    host, vm_factory = vm_broker_factory(memory_limit="64 KB")
    url = host.add_connector()
    body = "x" * 1024
    sent = threading.Event()

    def produce() -> None:
        with vm_factory.create_connection() as vc:
            session = vc.create_session()
            producer = session.create_producer(Queue("big"))
            for _ in range(300):  # ~380 KB: six times the limit
                producer.send(session.create_text_message(body))
        sent.set()

    producer_thread = threading.Thread(target=produce, daemon=True)
    producer_thread.start()
    # the producer reaches the limit and is held
    wait_until(lambda: host.usage()["blockedProducers"] != 0, WAIT)
    assert host.usage()["blockedProducers"] == 1 and not sent.is_set()
    # the stomp client's acks (on the connector's thread) must release the vm producer
    with ConnectionFactory(url).create_connection() as sc:
        sc.start()
        consumer = sc.create_session().create_consumer(Queue("big"))
        texts = [consumer.receive(WAIT) for _ in range(300)]
    assert all(m is not None and m.text == body for m in texts)
    producer_thread.join(WAIT)
    assert sent.is_set()
    assert host.usage()["blockedProducers"] == 0


def test_the_brokers_security_applies_to_stomp_logins(
        vm_broker_factory: Callable[..., Any]) -> None:
    policy = SecurityPolicy(iterations=1_000)  # test-friendly hashing rounds
    policy.add_user("alice", "alice-pw", roles=["traders"])
    policy.add_permission("orders.#", "queue", send=["traders"], consume=["traders"])
    host, _ = vm_broker_factory(security=policy)
    url = host.add_connector()
    with pytest.raises(JMSSecurityException, match="alice"):
        ConnectionFactory(url).create_connection("alice", "wrong")
    with ConnectionFactory(url).create_connection("alice", "alice-pw") as conn:
        session = conn.create_session()
        session.create_producer(Queue("orders.eu")).send(session.create_text_message("ok"))
    assert host.stats("orders.eu")["messageCount"] == 1


def test_jmspy_stat_reads_an_in_process_broker_through_its_connector(
        vm_broker_factory: Callable[..., Any]) -> None:
    host, vm_factory = vm_broker_factory()
    url = host.add_connector()
    _fill(vm_factory, "seen", 3)
    rows, _usage = fetch_report(*_address(url))
    assert {r["name"]: r["messageCount"] for r in rows}["seen"] == 3


def test_stopping_the_broker_closes_its_connectors(
        vm_broker_factory: Callable[..., Any]) -> None:
    from jmspy.transports import vm

    host, _ = vm_broker_factory()
    url = host.add_connector()
    lost = threading.Event()
    conn = ConnectionFactory(url).create_connection()
    conn.set_exception_listener(lambda exc: lost.set())
    vm.stop_broker(host.name)
    assert lost.wait(WAIT)  # the STOMP connection was closed by the broker
    assert host.connectors == []
    with pytest.raises(OSError), socket.create_connection(_address(url), timeout=WAIT):
        pass  # nobody listens any more
    conn.close()


@pytest.mark.parametrize("url", [
    "amqp://127.0.0.1:0", "stomp://127.0.0.1:notaport", "stomp://127.0.0.1", "tcp://x:1",
    "stomp://127.0.0.1:0/queue",
])
def test_a_connector_url_that_is_not_stomp_host_port_is_refused_with_the_form_to_use(
        vm_broker_factory: Callable[..., Any], url: str) -> None:
    host, _ = vm_broker_factory()
    with pytest.raises(InvalidConfigurationException, match=r"give stomp://HOST:PORT"):
        host.add_connector(url)
    assert host.connectors == []


@pytest.mark.parametrize("url", ["stomp://127.0.0.1:0?heartbeat=0",
                                 "stomp+ssl://127.0.0.1:0?ca_file=ca.pem"])
def test_a_connector_url_with_options_is_refused_not_ignored(
        vm_broker_factory: Callable[..., Any], url: str) -> None:
    host, _ = vm_broker_factory()
    with pytest.raises(InvalidConfigurationException, match="a connector takes no URL"):
        host.add_connector(url)
    assert host.connectors == []


def test_a_port_already_in_use_is_refused_naming_the_address(
        vm_broker_factory: Callable[..., Any]) -> None:
    host, _ = vm_broker_factory()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InvalidConfigurationException, match=f"127.0.0.1:{port}"):
            host.add_connector(f"stomp://127.0.0.1:{port}")
    assert host.connectors == []
