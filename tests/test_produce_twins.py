"""Differential tests for the plain-send twins (``jmspy._cext/_pure.produce``).

``send_plain`` gets the same random producer (open or closed, with or without a
destination, any time to live, delivery delay, mode and priority), session (open,
closed or closing; in a transaction or not), connection (open, closed or closing) and
message (each of jmspy's message classes, an application subclass, something that is not
a message). Both twins must either hand the call to ``_send_full`` untouched, or stamp
the same headers (times compared relative to the timestamp, which both read from the
wall clock) and make the same transport call. Then ``MessageProducer.send`` itself: the
errors and per-call overrides still behave as before on a real vm:// connection.
"""

from __future__ import annotations

import itertools
import time
from types import SimpleNamespace
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

import jmspy._cext.produce as cext
import jmspy._pure.produce as pure
from jmspy import ConnectionFactory, Session
from jmspy.destinations import Queue
from jmspy.errors import IllegalStateException, InvalidDestinationException, JMSException
from jmspy.message import BytesMessage, MapMessage, Message, TextMessage
from jmspy.transports import vm


class AppMessage(TextMessage):
    """An application subclass: its headers go through normal attribute stores."""

    __slots__ = ("stores",)

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "stores":
            self.stores = [*getattr(self, "stores", []), name]
        super().__setattr__(name, value)


KINDS = {
    "text": lambda: TextMessage("x"), "bytes": lambda: BytesMessage(b"x"),
    "map": MapMessage, "plain": Message, "app": lambda: AppMessage("x"),
    "not-a-message": lambda: SimpleNamespace(text="x"),
}


class Transport:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, str | None]] = []

    def send(self, message: Any, tx: str | None) -> None:
        self.sent.append((message, tx))


world = st.fixed_dictionaries({
    "producer_closed": st.sampled_from([False] * 4 + [True]),
    "destination": st.sampled_from([Queue("q")] * 4 + [None]),
    "ttl": st.sampled_from([0.0, 0.0, 1.5, 60.0, -1.0]),
    "delay": st.sampled_from([0.0, 0.0, 0.25, 3.0]),
    "mode": st.sampled_from([1, 2]),
    "priority": st.integers(0, 9),
    "session_state": st.sampled_from(["open"] * 4 + ["closed", "closing"]),
    "conn_state": st.sampled_from(["open"] * 4 + ["closed", "closing"]),
    "tx": st.sampled_from([None, None, "tx-1"]),
    "kind": st.sampled_from(sorted(KINDS)),
})


def play(twin: Any, w: dict[str, Any]) -> Any:
    transport = Transport()
    connection = SimpleNamespace(
        _closed=w["conn_state"] == "closed", _closing=w["conn_state"] == "closing",
        _id_prefix="ID:abc-1-", _message_ids=itertools.count(41),
    )
    session = SimpleNamespace(
        _closed=w["session_state"] == "closed", _closing=w["session_state"] == "closing",
        _connection=connection, _transport=transport, _tx=w["tx"],
    )
    full: list[Any] = []
    producer = SimpleNamespace(
        _session=session, destination=w["destination"], _closed=w["producer_closed"],
        _delivery_mode=w["mode"], _priority=w["priority"], _time_to_live=w["ttl"],
        _delivery_delay=w["delay"], _send_full=lambda m: full.append(m),
    )
    message = KINDS[w["kind"]]()
    if isinstance(message, AppMessage):
        message.stores = []  # only what the send stores
    before = int(time.time() * 1000)
    twin.send_plain(producer, message)
    after = int(time.time() * 1000)
    if full:
        assert full == [message] and not transport.sent
        return "full path"
    ((sent, tx),) = transport.sent
    assert sent is message
    ts = message.timestamp
    assert before <= ts <= after
    return (
        message.message_id, message.destination, message.delivery_mode, message.priority,
        message.expiration - ts if message.expiration else 0, message.delivery_time - ts,
        tx, getattr(message, "stores", None), next(connection._message_ids),
    )


@settings(max_examples=400, deadline=None, database=None)
@given(world)
def test_send_plain_twins_agree(w: dict[str, Any]) -> None:
    assert play(cext, w) == play(pure, w)


@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
def test_send_plain_stamps_what_send_stamped(twin: Any) -> None:
    w = {"producer_closed": False, "destination": Queue("q"), "ttl": 1.5, "delay": 0.25,
         "mode": 1, "priority": 7, "session_state": "open", "conn_state": "open",
         "tx": "tx-1", "kind": "app"}
    assert play(twin, w) == (
        "ID:abc-1-41", Queue("q"), 1, 7, 1500, 250, "tx-1",
        ["message_id", "timestamp", "destination", "delivery_mode", "priority",
         "expiration", "delivery_time"],
        42,
    )
    # no time to live: never expires; no delay: deliverable at its timestamp
    plain = play(twin, {**w, "ttl": 0.0, "delay": 0.0, "kind": "text", "tx": None})
    assert plain[4:7] == (0, 0, None)


@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
@pytest.mark.parametrize("change", [
    {"producer_closed": True}, {"destination": None}, {"session_state": "closed"},
    {"session_state": "closing"}, {"conn_state": "closed"}, {"conn_state": "closing"},
    {"kind": "not-a-message"},
])
def test_send_plain_hands_the_unusual_to_the_full_path(twin: Any, change: Any) -> None:
    w = {"producer_closed": False, "destination": Queue("q"), "ttl": 0.0, "delay": 0.0,
         "mode": 2, "priority": 4, "session_state": "open", "conn_state": "open",
         "tx": None, "kind": "text", **change}
    assert play(twin, w) == "full path"


def test_send_keeps_its_errors_and_overrides_on_vm() -> None:
    name = f"produce-twins-{id(object())}"
    vm.start_broker(name)
    try:
        with ConnectionFactory(f"vm://{name}").create_connection() as conn:
            session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
            queue = session.create_queue("q")
            producer = session.create_producer(queue)
            with pytest.raises(JMSException, match="takes a Message"):
                producer.send("not a message")  # type: ignore[arg-type]
            anonymous = session.create_producer(None)
            with pytest.raises(InvalidDestinationException, match="no destination"):
                anonymous.send(session.create_text_message("x"))
            producer.send(session.create_text_message("plain"))
            producer.send(session.create_text_message("urgent"), priority=9)
            consumer = session.create_consumer(queue)
            conn.start()
            got = [consumer.receive(5) for _ in range(2)]
            assert [(m.text, m.priority) for m in got if m is not None] == [
                ("urgent", 9), ("plain", 4)
            ]
            producer.close()
            with pytest.raises(IllegalStateException, match="producer is closed"):
                producer.send(session.create_text_message("late"))
    finally:
        vm.stop_broker(name)
