"""A connection can drop while a commit, an acknowledgement or a redelivery is under way.

The reconnect machinery runs on the transport's thread: it forgets every unconsumed
delivery of the dropped connection (the broker redelivers them, marked) while another
thread is between deciding what to settle and settling it. A commit that took its
messages before the drop and fails after it must roll back with
``TransactionRolledBackException``, not fail on bookkeeping the drop already reset (a
listener that then raised would stop hearing messages); an acknowledgement written just
before the drop must not take credit from the resumed connection's deliveries.

The transport is the in-process one; the drop is injected into the settling call itself:
the injected call reports the drop to the connection (as the transport's reader would)
and then fails or returns, which is the interleaving a real socket gives at random.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jmspy import (
    ConnectionFactory,
    JMSException,
    Session,
    TransactionRolledBackException,
)


def _drop(conn: Any) -> None:
    conn.on_connection_interrupted(JMSException(
        "lost the connection (injected)", error_code="CONNECTION_INTERRUPTED"))


@pytest.fixture()
def two_sessions() -> Iterator[tuple[Any, Any, Any, Callable[[int], None]]]:
    """A started connection on a private vm:// broker, one producing session, and a way
    to put ``n`` messages on queue ``q``."""
    factory = ConnectionFactory(f"vm://settle-{uuid.uuid4().hex[:8]}")
    conn = factory.create_connection()
    sender = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
    queue = sender.create_queue("q")
    producer = sender.create_producer(queue)

    def put(n: int) -> None:
        for i in range(n):
            producer.send(sender.create_text_message(f"m{i}"))

    try:
        yield conn, sender, queue, put
    finally:
        conn.close()


def test_a_commit_that_fails_after_the_drop_forgot_its_messages_rolls_back(
        two_sessions: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    conn, _, queue, put = two_sessions
    put(3)
    session = conn.create_session(True, Session.SESSION_TRANSACTED)
    consumer = session.create_consumer(queue)
    conn.start()
    assert consumer.receive(timeout=5.0) is not None
    transport = conn._transport

    def commit_meets_the_drop(tx: str) -> None:
        _drop(conn)  # the reader saw the socket end while the COMMIT was being written
        raise JMSException("connection reset while committing",
                           error_code="CONNECTION_INTERRUPTED")

    monkeypatch.setattr(transport, "commit", commit_meets_the_drop)
    with pytest.raises(TransactionRolledBackException):
        session.commit()
    monkeypatch.undo()
    # the session goes on: the next transaction receives and commits
    assert consumer.receive(timeout=5.0) is not None
    session.commit()


def test_an_acknowledgement_written_as_the_connection_drops_takes_no_new_credit(
        two_sessions: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """AUTO_ACKNOWLEDGE receive(): the ACK went out, then the drop forgot the delivery;
    counting it consumed afterwards would have been a second forgetting (the buffer's
    count is already zero) and failed."""
    conn, _, queue, put = two_sessions
    put(2)
    session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
    consumer = session.create_consumer(queue)
    conn.start()
    transport = conn._transport
    real_ack = transport.ack

    def ack_then_drop(tags: list[int], *args: Any) -> None:
        real_ack(tags, *args)
        _drop(conn)

    monkeypatch.setattr(transport, "ack", ack_then_drop)
    assert consumer.receive(timeout=5.0) is not None  # no error from the count
    stats = consumer.flow_stats()
    assert (stats.buffered, stats.unconsumed, stats.consumed) == (0, 0, 0)
