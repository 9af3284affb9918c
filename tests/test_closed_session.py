"""Every operation on a closed session, or on a session of a closed connection, raises
IllegalStateException (a JMSException) saying what is closed and what to do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jmspy import (
    Connection,
    ConnectionFactory,
    IllegalStateException,
    JMSException,
    Queue,
    Session,
    Topic,
)

SESSION_CLOSED = "the session is closed; create a new one with connection.create_session()"
CONNECTION_CLOSED = ("the connection is closed; create a new one with "
                     "factory.create_connection()")

#: Each operation, given (session, queue, a consumer of it, a producer for it).
OPERATIONS: dict[str, Callable[[Session, Queue, Any, Any], object]] = {
    "create_message": lambda s, q, c, p: s.create_message(),
    "create_text_message": lambda s, q, c, p: s.create_text_message("x"),
    "create_bytes_message": lambda s, q, c, p: s.create_bytes_message(b"x"),
    "create_map_message": lambda s, q, c, p: s.create_map_message({"a": 1}),
    "create_queue": lambda s, q, c, p: s.create_queue("other"),
    "create_topic": lambda s, q, c, p: s.create_topic("other"),
    "create_temporary_queue": lambda s, q, c, p: s.create_temporary_queue(),
    "create_temporary_topic": lambda s, q, c, p: s.create_temporary_topic(),
    "create_producer": lambda s, q, c, p: s.create_producer(q),
    "create_consumer": lambda s, q, c, p: s.create_consumer(q),
    "create_durable_consumer": lambda s, q, c, p: s.create_durable_consumer(
        Topic("t"), "sub"),
    "create_shared_consumer": lambda s, q, c, p: s.create_shared_consumer(Topic("t"), "sub"),
    "create_browser": lambda s, q, c, p: s.create_browser(q),
    "unsubscribe": lambda s, q, c, p: s.unsubscribe("sub"),
    "send": lambda s, q, c, p: p.send(_spare_message()),
    "receive": lambda s, q, c, p: c.receive(0.1),
    "receive_no_wait": lambda s, q, c, p: c.receive_no_wait(),
    "receive_body": lambda s, q, c, p: c.receive_body(str, 0.1),
    "set_message_listener": lambda s, q, c, p: c.set_message_listener(print),
    "commit": lambda s, q, c, p: s.commit(),
    "rollback": lambda s, q, c, p: s.rollback(),
    "recover": lambda s, q, c, p: s.recover(),
    "acknowledge": lambda s, q, c, p: s.acknowledge(),
}


def _spare_message() -> Any:
    from jmspy import TextMessage

    return TextMessage("made before the close")


def _open(factory: ConnectionFactory, transacted: bool) -> tuple[Any, Session, Queue, Any, Any]:
    conn = factory.create_connection(client_id="closed-test")
    session = conn.create_session(transacted=transacted)
    queue = session.create_queue("q")
    return conn, session, queue, session.create_consumer(queue), session.create_producer(queue)


def _refused_after_close(factory: ConnectionFactory, operation: str, close: str
                         ) -> tuple[Connection, IllegalStateException]:
    """``operation`` on a session once its ``close`` ("session" or "connection") is
    closed: the connection and the IllegalStateException it raised."""
    transacted = operation in ("commit", "rollback")
    conn, session, queue, consumer, producer = _open(factory, transacted)
    (session if close == "session" else conn).close()
    with pytest.raises(IllegalStateException) as caught:
        OPERATIONS[operation](session, queue, consumer, producer)
    return conn, caught.value


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_an_operation_on_a_closed_session_raises_illegal_state_saying_so(
        vm_factory: ConnectionFactory, operation: str) -> None:
    conn, error = _refused_after_close(vm_factory, operation, "session")
    assert isinstance(error, JMSException)
    assert str(error) == SESSION_CLOSED
    conn.close()


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_an_operation_on_a_session_of_a_closed_connection_names_the_connection(
        vm_factory: ConnectionFactory, operation: str) -> None:
    _, error = _refused_after_close(vm_factory, operation, "connection")
    assert str(error) == CONNECTION_CLOSED


def test_a_closed_connection_refuses_new_sessions_and_start(
        vm_factory: ConnectionFactory) -> None:
    conn = vm_factory.create_connection()
    conn.close()
    for call in (conn.create_session, conn.start, conn.stop):
        with pytest.raises(IllegalStateException, match="the connection is closed; create"):
            call()


def test_a_closed_consumer_of_an_open_session_says_the_consumer_is_closed(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        consumer = session.create_consumer(session.create_queue("q"))
        consumer.close()
        with pytest.raises(IllegalStateException,
                           match=r"is closed; create a new one with session.create_consumer"):
            consumer.receive(0.1)


def test_a_listener_that_closes_its_session_can_no_longer_create_messages(
        vm_factory: ConnectionFactory) -> None:
    """From a listener the close completes after it returns, but it has begun: the
    session refuses new messages at once."""
    import threading

    outcome: list[BaseException | None] = []
    done = threading.Event()
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue("inside")

        def listener(message: Any) -> None:
            session.close()
            try:
                session.create_text_message("after close")
                outcome.append(None)
            except BaseException as exc:  # recorded for the test to look at
                outcome.append(exc)
            done.set()

        session.create_consumer(queue).set_message_listener(listener)
        conn.start()
        sender = conn.create_session()
        sender.create_producer(queue).send(sender.create_text_message("go"))
        assert done.wait(30)  # bounds a hang only: the listener runs as the message lands
    assert isinstance(outcome[0], IllegalStateException)
    assert str(outcome[0]) == SESSION_CLOSED


def test_message_constructors_work_while_the_session_is_open(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        text = session.create_text_message("hi", {"n": 1})
        assert (text.text, text.get_property("n")) == ("hi", 1)
        assert session.create_bytes_message(b"\x01").body == b"\x01"
        assert dict(session.create_map_message({"a": 2}).map) == {"a": 2}
        assert session.create_message({"p": True}).get_property("p") is True
