"""stomp://'s asynchronous sends (transports/stomp/async_sends.py): written on the
caller's thread, reported by callback in send order when the broker answered, parked
across a reconnect, failed with the reason when refused, dropped, lost or closed.

The ledger is driven directly: ``live`` is the connection a test says is up, each
"write" is recorded, and the broker's answers are the calls the transport's receiving
thread makes (``answered``, ``refused``, ``connection_dropped``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from jmspy import JMSException
from jmspy.transports.stomp import async_sends
from jmspy.transports.stomp.async_sends import AsyncSends


class Harness:
    def __init__(self) -> None:
        self.conn: Any = "conn-1"
        self.sends = AsyncSends(lambda: self.conn, lambda: "127.0.0.1:61613")
        self.written: list[tuple[Any, str, dict[str, str]]] = []
        self.outcomes: list[tuple[str, Exception | None]] = []
        self.receipts: dict[str, str] = {}  # name -> receipt id
        self.fail_write: Exception | None = None

    def send(self, name: str, receipted: bool = True) -> None:
        def prepare(conn: Any) -> tuple[str | None, Callable[[dict[str, str]], None]]:
            receipt = self.sends.receipt_id() if receipted else None
            if receipt is not None:
                self.receipts[name] = receipt

            def write(extra: dict[str, str]) -> None:
                if self.fail_write is not None:
                    raise self.fail_write
                self.written.append((conn, name, extra))
            return receipt, write

        self.sends.send(prepare, name, lambda error: self.outcomes.append((name, error)))

    def answer(self, name: str) -> None:
        assert self.sends.answered(self.receipts[name])

    def reported(self) -> list[str]:
        return [name for name, _ in self.outcomes]

    def error_of(self, name: str) -> Exception | None:
        return dict(self.outcomes)[name]


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_a_receipted_send_is_written_at_once_and_reported_when_its_receipt_comes(
        h: Harness) -> None:
    h.send("a")
    assert [(c, n) for c, n, _ in h.written] == [("conn-1", "a")]
    assert h.written[0][2] == {"receipt": h.receipts["a"]}
    assert h.outcomes == []
    h.answer("a")
    assert h.outcomes == [("a", None)] and h.sends.unreported == 0


def test_outcomes_are_reported_in_send_order_when_the_broker_answers_out_of_order(
        h: Harness) -> None:
    for name in "abc":
        h.send(name)
    h.answer("c")
    h.answer("b")
    assert h.outcomes == []  # both wait behind a
    h.answer("a")
    assert h.reported() == ["a", "b", "c"]


def test_a_send_without_a_receipt_waits_behind_an_unanswered_one(h: Harness) -> None:
    """A non-persistent send behind a checkpoint: a producer that awaits its sends
    stops while the broker holds the checkpoint (producer flow control)."""
    h.send("checkpoint")
    h.send("plain-1", receipted=False)
    h.send("plain-2", receipted=False)
    assert len(h.written) == 3 and h.outcomes == []
    h.answer("checkpoint")
    assert h.reported() == ["checkpoint", "plain-1", "plain-2"]


def test_an_error_naming_a_receipt_fails_that_send_only(h: Harness) -> None:
    h.send("a")
    h.send("b")
    refused = JMSException("refused: over the limit")
    assert h.sends.refused(h.receipts["a"], lambda what: refused)
    assert not h.sends.refused("no-such-receipt", lambda what: refused)
    assert not h.sends.refused(None, lambda what: refused)
    h.answer("b")
    assert h.outcomes == [("a", refused), ("b", None)]


def test_a_drop_fails_the_unanswered_sends_naming_the_brokers_error(h: Harness) -> None:
    h.send("a")
    h.send("b")
    h.answer("a")
    h.sends.connection_dropped("memory limit reached")
    error = h.error_of("b")
    assert isinstance(error, JMSException) and error.error_code == "CONNECTION_INTERRUPTED"
    assert "dropped before it confirmed b" in str(error)
    assert "memory limit reached" in str(error)
    assert h.reported() == ["a", "b"]


def test_sends_while_down_are_parked_and_written_in_order_once_it_is_back(
        h: Harness) -> None:
    h.send("before")
    h.conn = None  # dropped
    h.sends.connection_dropped(None)
    h.send("p1")
    h.send("p2", receipted=False)
    assert [n for _, n, _ in h.written] == ["before"]
    assert h.sends.unreported == 2 and h.reported() == ["before"]
    h.conn = "conn-2"  # reconnected
    h.send("after")  # made before the flush: parked behind p1 and p2, not written first
    assert [n for _, n, _ in h.written] == ["before"]
    h.sends.flush_parked()
    assert [(c, n) for c, n, _ in h.written[1:]] == [
        ("conn-2", "p1"), ("conn-2", "p2"), ("conn-2", "after")]
    h.answer("p1")
    h.answer("after")
    assert h.reported() == ["before", "p1", "p2", "after"]


def test_lost_for_good_or_closed_fails_parked_and_unanswered_sends(h: Harness) -> None:
    h.send("written")
    h.conn = None
    h.send("parked")
    h.sends.fail_all(lambda what: JMSException(f"lost: {what}", error_code="CONNECTION_LOST"))
    assert h.reported() == ["written", "parked"]
    assert [str(h.error_of(n)) for n in ("written", "parked")] == [
        "lost: written", "lost: parked"]
    assert h.sends.unreported == 0


def test_a_failed_write_is_reported_with_its_error_in_order(h: Harness) -> None:
    h.send("a")
    broken = JMSException("the connection dropped", error_code="CONNECTION_INTERRUPTED")
    h.fail_write = broken
    h.send("b", receipted=False)
    assert h.outcomes == []  # behind a
    h.answer("a")
    assert h.outcomes == [("a", None), ("b", broken)]


def test_what_the_transport_refuses_before_writing_is_reported_in_order(h: Harness) -> None:
    h.send("a")

    def refuse(conn: Any) -> Any:
        raise ValueError("no such header")

    h.sends.send(refuse, "bad", lambda error: h.outcomes.append(("bad", error)))
    h.answer("a")
    assert h.reported() == ["a", "bad"]
    assert isinstance(h.error_of("bad"), JMSException)


def test_a_callback_that_raises_does_not_stop_the_others(h: Harness) -> None:
    def boom(error: Exception | None) -> None:
        raise RuntimeError("callback fault")

    h.sends.send(lambda conn: (None, lambda extra: None), "x", boom)
    h.send("after", receipted=False)
    assert h.reported() == ["after"]


def test_the_send_past_the_cap_waits_for_room(h: Harness, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    monkeypatch.setattr(async_sends, "CAP", 2)
    h.send("a")
    h.send("b")
    third = threading.Thread(target=h.send, args=("c",))
    third.start()
    third.join(0.2)  # gives it the time to reach the cap's wait
    assert third.is_alive() and [n for _, n, _ in h.written] == ["a", "b"]
    h.answer("a")  # one reported: room for c
    third.join(30)
    assert not third.is_alive() and [n for _, n, _ in h.written] == ["a", "b", "c"]


def _on_loop(run: Callable[[], None]) -> None:
    """Run ``run()`` inside a coroutine: on a thread running an event loop."""
    import asyncio

    async def main() -> None:
        run()

    asyncio.run(main())


def test_past_the_cap_a_send_on_an_event_loop_parks_and_is_written_as_room_comes(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(async_sends, "CAP", 2)
    _on_loop(lambda: [h.send(name) for name in "abcde"])  # returns: nothing waited
    assert [n for _, n, _ in h.written] == ["a", "b"]
    assert h.sends.unreported == 5
    for name, written in (("a", "abc"), ("b", "abcd"), ("c", "abcde")):
        h.answer(name)  # each report makes room for the next parked send
        assert "".join(n for _, n, _ in h.written) == written
    for name in "de":
        h.answer(name)
    # a thread not on a loop, with parked sends ahead of it, goes behind them
    _on_loop(lambda: [h.send(name) for name in "fgh"])
    later = threading.Thread(target=h.send, args=("i",))
    later.start()
    later.join(0.2)  # gives it the time to reach the cap's wait
    assert later.is_alive() and "".join(n for _, n, _ in h.written) == "abcdefg"
    for name in "fgh":
        h.answer(name)
    later.join(30)
    assert not later.is_alive() and "".join(n for _, n, _ in h.written) == "abcdefghi"
    h.answer("i")
    assert h.reported() == list("abcdefghi") and h.sends.unreported == 0


def test_sends_parked_past_the_cap_fail_in_order_when_the_connection_closes(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(async_sends, "CAP", 1)
    _on_loop(lambda: [h.send(name) for name in "abc"])
    h.sends.fail_all(lambda what: JMSException(f"closed before {what} was confirmed"))
    assert h.reported() == ["a", "b", "c"]
    assert [n for _, n, _ in h.written] == ["a"]
    assert all("closed before" in str(h.error_of(n)) for n in "abc")


def test_wait_settled_returns_once_every_written_send_is_reported(h: Harness) -> None:
    h.send("a")
    assert not h.sends.wait_settled(0.01)
    answering = threading.Timer(0.01, h.answer, args=("a",))
    answering.start()
    assert h.sends.wait_settled(30)
    answering.join()
