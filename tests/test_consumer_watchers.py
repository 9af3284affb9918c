"""``MessageConsumer.call_when_ready``: how an event loop waits for a message without a
thread of its own. A watcher is called once, outside the consumer's lock, on the thread
that made a message ready or ended the wait; it is refused (False, nothing kept) when
that is so already."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class Ends:
    """A connection (not started), its session, a queue and a consumer and producer of it."""

    conn: Any
    session: Any
    queue: Any
    consumer: Any
    producer: Any

    def send(self, text: str) -> None:
        self.producer.send(self.session.create_text_message(text))


@pytest.fixture
def ends(vm_factory: Any) -> Iterator[Ends]:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue("watched")
        yield Ends(conn, session, queue, session.create_consumer(queue),
                   session.create_producer(queue))


def _watch(consumer: Any) -> tuple[bool, list[tuple[int, Any]]]:
    """Register a watcher that records the thread it ran on and what a look found."""
    calls: list[tuple[int, Any]] = []

    def watcher() -> None:
        # outside the lock: looking at the consumer again must not deadlock
        calls.append((threading.get_ident(), consumer.flow_stats().buffered))

    return consumer.call_when_ready(watcher), calls


def test_a_watcher_is_called_once_by_the_send_that_makes_a_message_ready(ends: Ends) -> None:
    ends.conn.start()
    kept, calls = _watch(ends.consumer)
    assert kept and calls == []
    sender = threading.Thread(target=lambda: ends.send("one"))
    sender.start()
    sender.join(30)
    assert calls == [(sender.ident, 1)]  # over vm:// the sender's own thread
    ends.send("two")
    assert len(calls) == 1  # one-shot: the second message calls nobody
    message = ends.consumer.take_no_wait()
    assert message is not None and message.text == "one"


def test_a_watcher_is_refused_when_a_message_is_ready_already(ends: Ends) -> None:
    ends.send("x")
    ends.conn.start()
    kept, calls = _watch(ends.consumer)
    assert not kept and calls == []


def test_buffered_messages_of_a_stopped_connection_wake_the_watcher_at_start(
        ends: Ends) -> None:
    ends.send("x")
    kept, calls = _watch(ends.consumer)
    assert kept and calls == []  # buffered, but the connection is stopped
    ends.conn.start()
    assert calls == [(threading.get_ident(), 1)]


@pytest.mark.parametrize("what", ["consumer", "session", "connection"])
def test_closing_wakes_the_watcher_and_a_closed_consumer_refuses_one(
        ends: Ends, what: str) -> None:
    ends.conn.start()
    kept, calls = _watch(ends.consumer)
    assert kept
    {"consumer": ends.consumer, "session": ends.session, "connection": ends.conn}[what].close()
    assert len(calls) == 1
    assert _watch(ends.consumer)[0] is False


def test_a_watcher_that_raises_is_logged_and_the_message_still_delivered(
        ends: Ends, caplog: pytest.LogCaptureFixture) -> None:
    ends.conn.start()

    def broken() -> None:
        raise RuntimeError("watcher bug")

    assert ends.consumer.call_when_ready(broken)
    with caplog.at_level(logging.ERROR, logger="jmspy.client"):
        ends.send("x")
    assert "ready watcher raised" in caplog.text
    message = ends.consumer.receive(10)
    assert message is not None and message.text == "x"
