"""The connection and session state records (``jmspy._cext.lifecycle``,
``jmspy._pure.lifecycle``): both twins start everything False, keep what is set, and say
so alike; a real connection and session keep their state in them, so the flags the
compiled dispatch loop and send read are the ones ``close()`` and ``stop()`` write."""

from __future__ import annotations

from types import ModuleType

import pytest

import jmspy._cext.lifecycle as cext
import jmspy._pure.lifecycle as pure
from jmspy import ConnectionFactory, twins
from jmspy.errors import IllegalStateException
from jmspy.transports import vm

TWINS = [pytest.param(cext, id="compiled"), pytest.param(pure, id="pure")]


@pytest.mark.parametrize("twin", TWINS)
def test_a_new_record_is_neither_started_closing_nor_closed(twin: ModuleType) -> None:
    conn, session = twin.ConnectionLife(), twin.SessionLife()
    assert (conn.started, conn.closing, conn.closed) == (False, False, False)
    assert (session.closing, session.closed) == (False, False)


@pytest.mark.parametrize("twin", TWINS)
def test_the_flags_keep_what_is_set_and_nothing_else_exists(twin: ModuleType) -> None:
    conn, session = twin.ConnectionLife(), twin.SessionLife()
    conn.started = True
    conn.closing = True
    session.closed = True
    assert (conn.started, conn.closing, conn.closed) == (True, True, False)
    assert (session.closing, session.closed) == (False, True)
    assert repr(conn) == "ConnectionLife(started=True, closing=True, closed=False)"
    assert repr(session) == "SessionLife(closing=False, closed=True)"
    with pytest.raises(AttributeError):
        session.started = True  # a session has no start of its own: its connection's


def test_both_twins_print_the_same() -> None:
    records = []
    for twin in (cext, pure):
        conn = twin.ConnectionLife()
        conn.closed = True
        records.append((repr(conn), repr(twin.SessionLife())))
    assert records[0] == records[1]


@pytest.fixture
def broker() -> object:
    name = "lifecycle-records"
    vm.start_broker(name)
    yield name
    vm.stop_broker(name)


def test_a_connection_and_session_keep_their_state_in_the_running_twins_records(
    broker: str,
) -> None:
    conn = ConnectionFactory(f"vm://{broker}").create_connection()
    session = conn.create_session()
    assert type(conn._life) is twins.lifecycle.ConnectionLife
    assert type(session._life) is twins.lifecycle.SessionLife
    conn.start()
    assert conn._life.started and conn.started
    conn.stop()
    assert not conn._life.started
    producer = session.create_producer(session.create_queue("q"))
    message = session.create_text_message("x")
    session.close()
    assert session._life.closed and session.closed
    with pytest.raises(IllegalStateException, match="session is closed"):
        producer.send(message)
    conn.close()
    assert conn._life.closed and conn.closed and not conn._life.started


def test_a_send_on_an_open_session_of_a_closed_connection_is_refused(broker: str) -> None:
    conn = ConnectionFactory(f"vm://{broker}").create_connection()
    session = conn.create_session()
    producer = session.create_producer(session.create_queue("q"))
    message = session.create_text_message("x")
    conn._life.closing = True  # as close() sets it first, before closing the sessions
    with pytest.raises(IllegalStateException, match="connection is closed"):
        producer.send(message)
    conn._life.closing = False
    conn.close()
