"""``MessageConsumer.call_when_ready``: how an event loop waits for a message without a
thread of its own. A watcher is called once, outside the consumer's lock, on the thread
that made a message ready or ended the wait; it is refused (False, nothing kept) when
that is so already."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from jmspy import Session


def _watch(consumer: Any) -> tuple[bool, list[tuple[int, Any]]]:
    """Register a watcher that records the thread it ran on and what a look found."""
    calls: list[tuple[int, Any]] = []

    def watcher() -> None:
        # outside the lock: looking at the consumer again must not deadlock
        calls.append((threading.get_ident(), consumer.flow_stats().buffered))

    return consumer.call_when_ready(watcher), calls


def test_a_watcher_is_called_once_by_the_send_that_makes_a_message_ready(
        vm_factory: Any) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        queue = session.create_queue("watched")
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        conn.start()
        kept, calls = _watch(consumer)
        assert kept and calls == []
        sender = threading.Thread(target=lambda: producer.send(
            session.create_text_message("one")))
        sender.start()
        sender.join(30)
        assert calls == [(sender.ident, 1)]  # over vm:// the sender's own thread
        producer.send(session.create_text_message("two"))
        assert len(calls) == 1  # one-shot: the second message calls nobody
        message = consumer.take_no_wait()
        assert message is not None and message.text == "one"


def test_a_watcher_is_refused_when_a_message_is_ready_already(vm_factory: Any) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue("ready")
        consumer = session.create_consumer(queue)
        session.create_producer(queue).send(session.create_text_message("x"))
        conn.start()
        kept, calls = _watch(consumer)
        assert not kept and calls == []


def test_buffered_messages_of_a_stopped_connection_wake_the_watcher_at_start(
        vm_factory: Any) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue("stopped")
        consumer = session.create_consumer(queue)
        session.create_producer(queue).send(session.create_text_message("x"))
        kept, calls = _watch(consumer)
        assert kept and calls == []  # buffered, but the connection is stopped
        conn.start()
        assert calls == [(threading.get_ident(), 1)]


@pytest.mark.parametrize("what", ["consumer", "session", "connection"])
def test_closing_wakes_the_watcher_and_a_closed_consumer_refuses_one(
        vm_factory: Any, what: str) -> None:
    conn = vm_factory.create_connection()
    session = conn.create_session()
    consumer = session.create_consumer(session.create_queue(f"closing-{what}"))
    conn.start()
    kept, calls = _watch(consumer)
    assert kept
    {"consumer": consumer, "session": session, "connection": conn}[what].close()
    assert len(calls) == 1
    assert _watch(consumer)[0] is False
    conn.close()


def test_a_watcher_that_raises_is_logged_and_the_message_still_delivered(
        vm_factory: Any, caplog: pytest.LogCaptureFixture) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue("raising")
        consumer = session.create_consumer(queue)
        conn.start()

        def broken() -> None:
            raise RuntimeError("watcher bug")

        assert consumer.call_when_ready(broken)
        with caplog.at_level(logging.ERROR, logger="jmspy.client"):
            session.create_producer(queue).send(session.create_text_message("x"))
        assert "ready watcher raised" in caplog.text
        message = consumer.receive(10)
        assert message is not None and message.text == "x"
