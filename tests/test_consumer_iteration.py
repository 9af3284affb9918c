"""``for message in consumer``: iterate received messages until the consumer, its session
or its connection closes; ``messages(timeout)`` adds an idle limit."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from jmspy import ConnectionFactory, JMSException, Message, Session, TextMessage

JOIN = 30.0  # s: bounds a hang only; every close below wakes the waiting iteration


def _texts(messages: list[Message]) -> list[str | None]:
    return [m.text if isinstance(m, TextMessage) else None for m in messages]


def _iterate_on_a_thread(consumer: Any) -> tuple[threading.Thread, list[Message],
                                                  list[BaseException]]:
    seen: list[Message] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for message in consumer:
                seen.append(message)
        except BaseException as exc:  # recorded for the test to look at
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, seen, errors


def _wait_until(condition: Callable[[], bool]) -> None:
    event = threading.Event()
    for _ in range(3000):
        if condition():
            return
        event.wait(0.01)  # waits for the iterating thread to take what was sent
    raise AssertionError("condition not reached")


@pytest.mark.parametrize("closer", ["consumer", "session", "connection"])
def test_for_loop_yields_messages_then_ends_when_closed_from_another_thread(
        vm_factory: ConnectionFactory, closer: str) -> None:
    conn = vm_factory.create_connection()
    session = conn.create_session()
    queue = session.create_queue("loop")
    consumer = session.create_consumer(queue)
    conn.start()
    thread, seen, errors = _iterate_on_a_thread(consumer)
    producer = session.create_producer(queue)
    for n in range(5):
        producer.send(session.create_text_message(f"m{n}"))
    _wait_until(lambda: len(seen) == 5)
    {"consumer": consumer, "session": session, "connection": conn}[closer].close()
    thread.join(JOIN)
    assert not thread.is_alive()
    assert errors == []
    assert _texts(seen) == [f"m{n}" for n in range(5)]
    conn.close()


def test_iterating_a_closed_consumer_yields_nothing(vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        consumer = session.create_consumer(session.create_queue("closed"))
        consumer.close()
        assert list(consumer) == []
        assert list(consumer.messages(timeout=0.1)) == []


def test_messages_timeout_is_an_idle_limit_not_a_bound_on_the_loop(
        vm_factory: ConnectionFactory) -> None:
    """Messages sent while the loop runs keep it going past the timeout; it ends only
    once a whole timeout passes with nothing new."""
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue("idle")
        producer = session.create_producer(queue)
        consumer = session.create_consumer(queue)
        conn.start()
        producer.send(session.create_text_message("0"))
        got: list[str | None] = []
        for message in consumer.messages(timeout=2.0):
            got.extend(_texts([message]))
            if len(got) < 4:  # each step sends the next one: the loop never goes idle
                producer.send(session.create_text_message(str(len(got))))
        assert got == ["0", "1", "2", "3"]


def test_iteration_acknowledges_per_session_mode_and_redelivers_after_recover(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        queue = session.create_queue("again")
        producer = session.create_producer(queue)
        for n in range(3):
            producer.send(session.create_text_message(str(n)))
        consumer = session.create_consumer(queue)
        conn.start()
        first = list(consumer.messages(timeout=0.5))
        assert _texts(first) == ["0", "1", "2"]
        assert not any(m.redelivered for m in first)
        session.recover()  # nothing was acknowledged: all three come again
        again = list(consumer.messages(timeout=0.5))
        assert _texts(again) == ["0", "1", "2"]
        assert all(m.redelivered and m.delivery_count == 2 for m in again)
        session.acknowledge()
        assert conn.destination_stats(queue)["messageCount"] == 0


def test_iteration_over_a_transacted_session_sees_rolled_back_messages_again(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session(transacted=True)
        queue = session.create_queue("tx")
        producer = session.create_producer(queue)
        producer.send(session.create_text_message("a"))
        session.commit()
        consumer = session.create_consumer(queue)
        conn.start()
        seen: list[Message] = []
        for message in consumer.messages(timeout=0.5):
            seen.append(message)
            if len(seen) == 1:
                session.rollback()  # "a" comes round again, marked redelivered
        assert _texts(seen) == ["a", "a"]
        assert [m.redelivered for m in seen] == [False, True]
        session.commit()


def test_a_connection_lost_for_good_raises_instead_of_ending_the_loop_quietly(
        vm_broker_factory: Callable[..., Any]) -> None:
    from jmspy.transports import vm

    host, factory = vm_broker_factory()
    conn = factory.create_connection()  # reconnect off: losing the broker is final
    session = conn.create_session()
    consumer = session.create_consumer(session.create_queue("lost"))
    conn.start()
    thread, seen, errors = _iterate_on_a_thread(consumer)
    vm.stop_broker(host.name)
    thread.join(JOIN)
    assert not thread.is_alive()
    assert seen == [] and len(errors) == 1
    assert isinstance(errors[0], JMSException)
    assert errors[0].error_code == "CONNECTION_LOST"
    conn.close()
