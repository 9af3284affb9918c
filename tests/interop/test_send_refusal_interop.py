"""Issue 11 point 12 against ActiveMQ 5 and RabbitMQ: a persistent send the broker refuses
for permissions raises ``JMSSecurityException`` from ``send()`` (or, with a
``persistentSendWindow`` > 1, from the next send), the exception listener still hears of
it, and a permitted persistent send returns with the message on the broker.

ActiveMQ runs secured (its own session broker: simpleAuthenticationPlugin +
authorizationPlugin, users in brokers.SECURED_USERS); RabbitMQ is the shared session
broker with one more user, whose ``write`` permission matches nothing."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from brokers import SECURED_MAX_FRAME, SECURED_USERS, ActiveMQ, BrokerProcess, rabbitmqctl

from jmspy import ConnectionFactory, JMSException
from jmspy.errors import JMSSecurityException, ResourceAllocationException

RABBIT_READER = ("jmspy-reader", "reader-pw")


@pytest.fixture(scope="session")
def secured_activemq() -> Iterator[BrokerProcess]:
    broker = ActiveMQ(secured=True)
    try:
        yield broker.start()
    finally:
        broker.close()


@pytest.fixture(scope="session")
def rabbitmq_reader(rabbitmq: BrokerProcess) -> BrokerProcess:
    """The shared RabbitMQ with a user that may configure and read but write nothing
    (write permission ``^$``); other tests keep using the default user."""
    rabbitmqctl(rabbitmq, "add_user", *RABBIT_READER)
    rabbitmqctl(rabbitmq, "set_permissions", "-p", "/", RABBIT_READER[0], ".*", "^$", ".*")
    return rabbitmq


class Peer:
    """One secured broker: a user refused writes and a user allowed them."""

    def __init__(self, broker: BrokerProcess, refused: tuple[str, str],
                 allowed: tuple[str | None, str | None]) -> None:
        self.url = f"stomp://{broker.host}:{broker.stomp_port}"
        self.refused, self.allowed = refused, allowed
        self.made: list[Any] = []

    def connect(self, creds: tuple[str | None, str | None], **props: Any
                ) -> tuple[Any, list[JMSException], threading.Event]:
        conn = ConnectionFactory(self.url, **props).create_connection(*creds)
        self.made.append(conn)
        heard: list[JMSException] = []
        first = threading.Event()

        def listener(error: JMSException) -> None:
            heard.append(error)
            first.set()

        conn.set_exception_listener(listener)
        return conn, heard, first


@pytest.fixture(params=["activemq", "rabbitmq"])
def peer(request: pytest.FixtureRequest) -> Iterator[Peer]:
    if request.param == "activemq":
        broker = request.getfixturevalue("secured_activemq")
        p = Peer(broker, ("reader", SECURED_USERS["reader"]),
                 ("writer", SECURED_USERS["writer"]))
    else:
        broker = request.getfixturevalue("rabbitmq_reader")
        p = Peer(broker, RABBIT_READER, (None, None))
    yield p
    for conn in p.made:
        try:
            conn.close()
        except JMSException:
            pass  # the connection the broker closed after refusing


def _queue_name() -> str:
    return f"refusal-{uuid.uuid4().hex[:8]}"


def test_refused_persistent_send_raises_security_exception_from_send(peer: Peer) -> None:
    conn, heard, first = peer.connect(peer.refused)
    session = conn.create_session()
    producer = session.create_producer(session.create_queue(_queue_name()))
    with pytest.raises(JMSSecurityException) as info:
        producer.send(session.create_text_message("forbidden"))
    assert "refused the persistent message" in str(info.value)
    assert first.wait(10) and heard  # the listener is told too (the ERROR, or the loss)


def test_permitted_persistent_send_returns_with_the_message_on_the_broker(
    peer: Peer,
) -> None:
    name = _queue_name()
    conn, heard, _ = peer.connect(peer.allowed)
    session = conn.create_session()
    producer = session.create_producer(session.create_queue(name))
    producer.send(session.create_text_message("kept"))
    conn.close()  # the message must be on the broker already, not in this client
    other, _, _ = peer.connect(peer.allowed)
    other.start()
    s2 = other.create_session()
    got = s2.create_consumer(s2.create_queue(name)).receive(10)
    assert got is not None and got.text == "kept"
    assert not heard


def test_windowed_refusal_is_raised_by_the_next_send(peer: Peer) -> None:
    conn, _, first = peer.connect(peer.refused, persistentSendWindow=4)
    session = conn.create_session()
    producer = session.create_producer(session.create_queue(_queue_name()))
    producer.send(session.create_text_message("forbidden"))  # in the window: returns
    assert first.wait(10)  # the broker's ERROR has come
    with pytest.raises(JMSSecurityException):
        producer.send(session.create_text_message("next"))




def test_persistent_send_over_activemqs_frame_limit_raises_resource_allocation_exception(
    secured_activemq: BrokerProcess,
) -> None:
    """ActiveMQ's STOMP ``wireFormat.maxFrameSize`` (set low on the secured broker): its
    ERROR says "The maximum frame size (or command length) was exceeded"."""
    peer = Peer(secured_activemq, ("reader", SECURED_USERS["reader"]),
                ("writer", SECURED_USERS["writer"]))
    conn, heard, first = peer.connect(peer.allowed)
    try:
        session = conn.create_session()
        producer = session.create_producer(session.create_queue(_queue_name()))
        with pytest.raises(ResourceAllocationException, match="exceeded"):
            producer.send(session.create_bytes_message(b"x" * (2 * SECURED_MAX_FRAME)))
        assert first.wait(10) and heard  # ActiveMQ closes: the listener hears the loss
    finally:
        try:
            conn.close()
        except JMSException:
            pass
