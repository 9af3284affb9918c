"""An event loop reading a stomp:// socket while the transport lends it the turn
(jmspy/aio/loop_reading.py, the loop's side of transports/reading_turn.py).

A socketpair stands for the broker's connection: the test writes bytes on one end, the
turn's ``read_once`` reads the other and records the thread that read. The receiver
thread is a plain thread in ``wait_home``, as stomp.py's receiver loop is while the turn
is lent."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Iterator

import pytest

from jmspy.aio.loop_reading import LoopReading
from jmspy.transports import reading_turn
from jmspy.transports.reading_turn import ReadingTurn


class Wire:
    """The socketpair, the turn over it and who read what."""

    def __init__(self) -> None:
        self.mine, self.peer = socket.socketpair()
        self.running = True
        self.readers: list[int] = []
        self.end: BaseException | None = None
        self.turn = ReadingTurn(self.read_once, lambda: self.mine, lambda: self.running)

    def read_once(self) -> BaseException | None:
        data = self.mine.recv(4096)
        self.readers.append(threading.get_ident())
        if not data:
            self.end = ConnectionError("the broker closed the connection")
            return self.end
        return None

    def close(self) -> None:
        self.mine.close()
        self.peer.close()


@pytest.fixture
def wire() -> Iterator[Wire]:
    w = Wire()
    yield w
    w.close()


def _receiver(turn: ReadingTurn) -> tuple[threading.Thread, list[BaseException | None]]:
    got: list[BaseException | None] = []
    thread = threading.Thread(target=lambda: got.append(turn.wait_home()), daemon=True)
    thread.start()
    return thread, got


async def _until(check: object, turns: int = 20000) -> None:
    """Let the loop run (its reads are callbacks) until ``check()`` holds."""
    for _ in range(turns):
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.001)  # the loop's reader callbacks run between these
    raise AssertionError("the condition never held")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_lent_turn_is_read_on_the_loop_and_kept_while_the_loop_keeps_up(
        wire: Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading_turn, "LOOP_TICK", 0.005)

    async def main() -> None:
        reading = LoopReading(asyncio.get_running_loop())
        wire.turn.lend([reading])
        assert wire.turn.holds(reading)
        receiver, got = _receiver(wire.turn)
        await _until(lambda: reading.holding)
        for i in range(5):
            wire.peer.sendall(b"frame %d" % i)
            await _until(lambda n=i: len(wire.readers) > n)
        await asyncio.sleep(0.05)  # ten loop ticks with nothing unread: still lent
        assert wire.turn.holds(reading) and receiver.is_alive()
        assert set(wire.readers) == {threading.get_ident()}  # every read on the loop
        reading.close()  # the connection closes: the receiver thread reads again
        receiver.join(30)
        assert not receiver.is_alive() and got == [None] and not wire.turn.lent()

    asyncio.run(main())


def test_a_stalled_loop_loses_the_turn_once_bytes_wait_a_whole_loop_tick(
        wire: Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading_turn, "LOOP_TICK", 0.005)

    async def main() -> None:
        fds = _open_fds()  # the loop's own are open by now
        reading = LoopReading(asyncio.get_running_loop())
        wire.turn.lend([reading])
        await _until(lambda: reading.holding)
        receiver, _ = _receiver(wire.turn)
        wire.peer.sendall(b"unread")
        threading.Event().wait(0.1)  # blocks the loop itself: twenty loop ticks stalled
        receiver.join(30)
        assert not receiver.is_alive() and not wire.turn.lent()
        assert wire.readers == []  # the receiver thread reads it now, not the loop
        await _until(lambda: not reading.holding)  # told: it stopped watching
        assert _open_fds() == fds  # and closed its duplicate descriptor

    asyncio.run(main())


def test_need_reader_takes_the_turn_from_a_loop_between_its_reads(wire: Wire) -> None:
    async def main() -> None:
        reading = LoopReading(asyncio.get_running_loop())
        wire.turn.lend([reading])
        await _until(lambda: reading.holding)
        wire.turn.need_reader()  # e.g. a blocking call on the loop waits for a RECEIPT
        assert not wire.turn.lent()
        await _until(lambda: not reading.holding)

    asyncio.run(main())


def test_the_end_of_the_stream_read_on_the_loop_is_raised_by_the_receiver(
        wire: Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading_turn, "LOOP_TICK", 60.0)  # only the holder gives it back

    async def main() -> None:
        reading = LoopReading(asyncio.get_running_loop())
        wire.turn.lend([reading])
        await _until(lambda: reading.holding)
        receiver, got = _receiver(wire.turn)
        wire.peer.shutdown(socket.SHUT_WR)  # the broker closes
        await _until(lambda: not reading.holding)
        receiver.join(30)
        assert got == [wire.end] and wire.end is not None
        assert wire.readers == [threading.get_ident()]

    asyncio.run(main())


def test_stomp_py_stopping_its_loop_takes_the_turn_from_the_event_loop(
        wire: Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading_turn, "LOOP_TICK", 0.005)

    async def main() -> None:
        reading = LoopReading(asyncio.get_running_loop())
        wire.turn.lend([reading])
        await _until(lambda: reading.holding)
        receiver, _ = _receiver(wire.turn)
        wire.running = False  # disconnecting: the socket is about to close
        receiver.join(30)
        assert not receiver.is_alive() and not wire.turn.lent()
        await _until(lambda: not reading.holding)

    asyncio.run(main())


def test_a_closed_or_closing_loop_is_not_lent_the_turn(wire: Wire) -> None:
    fds = _open_fds()
    loop = asyncio.new_event_loop()
    reading = LoopReading(loop)
    loop.close()
    wire.turn.lend([reading])
    assert not wire.turn.lent() and _open_fds() == fds

    async def closed_one() -> None:
        closing = LoopReading(asyncio.get_running_loop())
        closing.close()
        wire.turn.lend([closing])
        assert not wire.turn.lent()

    asyncio.run(closed_one())


def test_woke_records_the_loop_only_on_a_reading_thread_in_a_batch() -> None:
    from jmspy.reading_lease import collect_woken, stop_collecting

    loop = asyncio.new_event_loop()
    try:
        reading = LoopReading(loop)
        reading.woke()  # not in a batch: nowhere to record
        woken = collect_woken()
        try:
            reading.woke()
        finally:
            stop_collecting()
        assert woken == [reading]
    finally:
        loop.close()


class _LoopHolder:
    """A loop holder without a loop: the test calls ``read_ready`` itself."""

    def __init__(self) -> None:
        self.ended = 0

    def _has_work(self) -> bool:
        return False

    def _lend_reading(self, lease: ReadingTurn) -> bool:
        lease.poll_on_loop(self)
        return True

    def _turn_ended(self) -> None:
        self.ended += 1


def test_a_stale_readiness_reads_nothing_instead_of_blocking_the_loop(wire: Wire) -> None:
    """The loop saw the socket readable, but before its callback ran the receiver thread
    took the turn back, read those bytes and lent the turn again: the callback must not
    block in ``recv`` on a socket with nothing to read."""
    wire.mine.settimeout(5)  # a recv that blocks fails the test instead of hanging it
    holder = _LoopHolder()
    wire.turn.lend([holder])
    assert wire.turn.read_ready(holder)  # nothing there: kept, and nothing was read
    assert wire.readers == [] and wire.turn.holds(holder)
    wire.peer.sendall(b"frame")
    assert wire.turn.read_ready(holder)
    assert len(wire.readers) == 1 and holder.ended == 0


def test_the_reading_threads_own_work_takes_the_turn_back_from_a_loop_between_reads(
        wire: Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    """``due`` (mqtt://: paho's queued writes, its keep-alive look): the receiver thread
    takes the turn back at its next look although the loop keeps up."""
    monkeypatch.setattr(reading_turn, "LOOP_TICK", 0.005)
    work = threading.Event()
    turn = ReadingTurn(wire.read_once, lambda: wire.mine, lambda: wire.running,
                       due=work.is_set)

    async def main() -> None:
        reading = LoopReading(asyncio.get_running_loop())
        turn.lend([reading])
        receiver, got = _receiver(turn)
        await _until(lambda: reading.holding)
        wire.peer.sendall(b"frame")
        await _until(lambda: len(wire.readers) == 1)
        await asyncio.sleep(0.05)  # ten loop ticks, nothing due: still lent
        assert turn.holds(reading) and receiver.is_alive()
        work.set()
        await asyncio.to_thread(receiver.join, 30)
        assert got == [None] and not turn.lent()
        await _until(lambda: not reading.holding)  # told: it stopped watching
        reading.close()

    asyncio.run(main())


class _Session:
    """A sync session as a turn sees it (no ``_turn_ended``: not an event loop)."""

    def __init__(self) -> None:
        self.offered = 0

    def _has_work(self) -> bool:
        return False

    def _lend_reading(self, lease: ReadingTurn) -> bool:
        self.offered += 1
        return True


def test_a_turn_for_event_loops_only_passes_over_the_sessions_it_woke(wire: Wire) -> None:
    """``sessions=False`` (mqtt://): a woken session thread is not offered the turn; an
    event loop woken in the same batch is."""
    turn = ReadingTurn(wire.read_once, lambda: wire.mine, lambda: wire.running,
                       sessions=False)
    session = _Session()
    turn.lend([session])
    assert session.offered == 0 and not turn.lent()

    async def main() -> None:
        reading = LoopReading(asyncio.get_running_loop())
        turn.lend([session, reading])
        assert session.offered == 0 and turn.holds(reading)
        reading.close()  # given back once the loop has taken the turn up
        await _until(lambda: not turn.lent())

    asyncio.run(main())
