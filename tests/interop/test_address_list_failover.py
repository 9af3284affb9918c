"""Address lists against real brokers: the broker a connection is on is killed, and the
connection moves to the next one of its ``imqAddressList``.

Two ``jmspy broker`` processes (stomp://) and two Mosquittos (mqtt://), each pair
independent brokers: what the first held stays with it, so these tests check the move
itself -- the exception listener's events and ``conn.where`` name the new broker, the
listener goes on there, the client id and the durable subscription are re-created on
it, and a transaction open across the move fails its commit with
TransactionRolledBackException. (Brokers that share their queues, a RabbitMQ cluster or
an ActiveMQ master/slave pair, also give the unacknowledged messages back.)
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import HOST, Mosquitto
from jmspy_process import JmspyBroker
from recording import Events

from jmspy import ConnectionFactory, Session
from jmspy.errors import TransactionRolledBackException

FAST = {"imqReconnectEnabled": True, "imqReconnectInterval": 50, "imqReconnectAttempts": 2,
        "imqAddressListIterations": 20}


class Texts:
    def __init__(self) -> None:
        self.got: list[str] = []
        self.cond = threading.Condition()

    def __call__(self, message: Any) -> None:
        with self.cond:
            self.got.append(message.text)
            self.cond.notify_all()

    def wait_for(self, text: str, timeout: float = 20.0) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: text in self.got, timeout), self.got


@pytest.fixture
def two_jmspy_brokers(tmp_path: Path) -> Iterator[tuple[JmspyBroker, JmspyBroker]]:
    first = JmspyBroker(tmp_path / "first.log")
    second = JmspyBroker(tmp_path / "second.log")
    first.start()
    second.start()
    try:
        yield first, second
    finally:
        first.kill()
        second.kill()


def test_stomp_moves_to_the_next_broker_of_the_list(
        two_jmspy_brokers: tuple[JmspyBroker, JmspyBroker]) -> None:
    first, second = two_jmspy_brokers
    events, heard, durable = Events(timeout=30.0), Texts(), Texts()
    run = uuid.uuid4().hex[:8]
    factory = ConnectionFactory(f"{first.url},{second.url}", **FAST)
    conn = factory.create_connection(client_id=f"mover-{run}")
    try:
        assert conn.where == first.url
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        queue = session.create_queue(f"move.{run}")
        topic = session.create_topic(f"move.{run}.news")
        session.create_consumer(queue).set_message_listener(heard)
        session.create_durable_subscriber(topic, "news").set_message_listener(durable)
        tx = conn.create_session(True)
        producer = session.create_producer(queue)
        conn.start()
        producer.send(session.create_text_message("on the first"))
        heard.wait_for("on the first")
        tx.create_producer(queue).send(tx.create_text_message("in a lost transaction"))

        first.kill()
        lost = events.wait_for("CONNECTION_INTERRUPTED")
        resumed = events.wait_for("CONNECTION_RESUMED")
        assert lost.broker == first.url
        assert resumed.broker == second.url and second.url in str(resumed)
        assert conn.where == second.url

        producer.send(session.create_text_message("on the second"))
        heard.wait_for("on the second")
        session.create_producer(topic).send(session.create_text_message("news"))
        durable.wait_for("news")  # the durable subscription, client id and all, is back
        with pytest.raises(TransactionRolledBackException, match="interrupted"):
            tx.commit()
        tx.commit()  # the next transaction is a fresh one, on the second broker
    finally:
        conn.close()


def test_the_first_connection_skips_a_dead_broker_of_the_list(
        two_jmspy_brokers: tuple[JmspyBroker, JmspyBroker]) -> None:
    first, second = two_jmspy_brokers
    first.kill()
    with ConnectionFactory(imqAddressList=f"{first.url},{second.url}").create_connection() as c:
        assert c.where == second.url


@pytest.fixture
def two_mosquittos() -> Iterator[tuple[Mosquitto, Mosquitto]]:
    first, second = Mosquitto(), Mosquitto()
    first.start()
    second.start()
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def test_mqtt_moves_to_the_next_broker_of_the_list(
        two_mosquittos: tuple[Mosquitto, Mosquitto]) -> None:
    first, second = two_mosquittos
    urls = [f"mqtt://{HOST}:{m.mqtt_port}" for m in (first, second)]
    events, heard = Events(timeout=30.0), Texts()
    run = uuid.uuid4().hex[:8]
    conn = ConnectionFactory(address_list=",".join(urls), **FAST).create_connection(
        client_id=f"mover-{run}")
    try:
        assert conn.where == urls[0]
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        topic = session.create_topic(f"move/{run}")
        session.create_durable_subscriber(topic, "news").set_message_listener(heard)
        producer = session.create_producer(topic)
        conn.start()
        producer.send(session.create_text_message("on the first"))
        heard.wait_for("on the first")

        first.stop()
        assert events.wait_for("CONNECTION_INTERRUPTED").broker == urls[0]
        assert events.wait_for("CONNECTION_RESUMED").broker == urls[1]
        assert conn.where == urls[1]
        producer.send(session.create_text_message("on the second"))
        heard.wait_for("on the second")
    finally:
        conn.close()
