"""Fair turns: one client's flood of SENDs cannot hold another client's round trip.

A session given a turn budget acts on that many frames per call and keeps the rest
buffered (sans-I/O, no loop). The asyncio host gives every connection that budget: it
stops reading a connection whose frames wait and takes the next batch on a later loop
turn, so another connection read meanwhile is answered (its RECEIPT committed and
written) while the flood is still being worked through. Driven on a real event loop with
recording transports, no sockets; each ``asyncio.sleep(0)`` is one loop turn, so what is
proved is the order of the writes, never a duration.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from stomp_support import RecordingTransport

from jmspy import twins
from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.stomp.protocol import TURN_FRAMES, StompSession
from jmspy.broker_ref.protocols.stomp.server import StompServer, _Connection
from jmspy.broker_ref.store.sqlite_store import SqliteStore

_codec: Any = twins.stomp_codec

FLOOD = 1000  # persistent SENDs in one read: many turns' worth (TURN_FRAMES each)


def _frame(command: str, body: bytes = b"", **headers: str) -> bytes:
    lines = "".join(f"{k.replace('_', '-')}:{v}\n" for k, v in headers.items())
    return f"{command}\n{lines}\n".encode() + body + b"\0"


def _answers(session: StompSession) -> list[tuple[str, str]]:
    parser = _codec.FrameParser("1.2", None, False)
    parser.feed(session.data_to_send())
    session.written()
    return [(f.command, f.header("receipt-id") or "") for f in iter(parser.next_frame, None)]


def _session(frames: int, body_bytes: int | None = None) -> StompSession:
    session = StompSession(Broker(name="turns"))
    session.receive_data(_frame("CONNECT", accept_version="1.2", host="/"))
    assert _answers(session) == [("CONNECTED", "")]
    session.turn_frames = frames
    if body_bytes is not None:
        session.turn_bytes = body_bytes
    return session


def test_a_session_with_a_turn_budget_acts_on_that_many_frames_per_call() -> None:
    session = _session(3)
    session.receive_data(b"".join(
        _frame("SEND", b"m", destination="/queue/q", receipt=str(i)) for i in range(7)))
    batches = [_answers(session)]
    while session.input_waiting:
        session.receive_data(b"")  # the host's next turn: what is still buffered
        batches.append(_answers(session))
    assert [[rid for _, rid in batch] for batch in batches] == [
        ["0", "1", "2"], ["3", "4", "5"], ["6"]]
    assert session.broker.stats("q").message_count == 7


def test_without_a_budget_a_session_acts_on_everything_it_was_given() -> None:
    session = StompSession(Broker(name="turns"))
    session.receive_data(_frame("CONNECT", accept_version="1.2", host="/") + b"".join(
        _frame("SEND", b"m", destination="/queue/q", receipt=str(i)) for i in range(200)))
    assert len(_answers(session)) == 201 and not session.input_waiting


def test_big_bodies_end_a_turn_before_its_frame_count() -> None:
    """The batch is bounded in body bytes too: a turn stops after the frame that spent
    them, so a few large SENDs are not one turn's work."""
    session = _session(100, body_bytes=2500)
    session.receive_data(b"".join(
        _frame("SEND", b"x" * 1000, destination="/queue/q", receipt=str(i))
        for i in range(5)))
    first = _answers(session)
    assert [rid for _, rid in first] == ["0", "1", "2"] and session.input_waiting
    session.receive_data(b"")
    assert [rid for _, rid in _answers(session)] == ["3", "4"]
    assert not session.input_waiting


def test_full_path_frames_end_a_turn_once_its_time_is_spent() -> None:
    """Persistent SENDs (the full path: a store write each) are bounded by time as well:
    the call stops after the frame that took the clock past ``turn_seconds``. Common SENDs
    are not timed (the frame count bounds them)."""
    session = _session(100)
    now = [0.0]

    def clock() -> float:  # each reading is one frame's work later
        now[0] += 0.4
        return now[0]

    session.turn_clock, session.turn_seconds = clock, 1.0
    session.receive_data(b"".join(
        _frame("SEND", b"m", destination="/queue/q", persistent="true", receipt=str(i))
        for i in range(5)))
    # started at 0.4, so due at 1.4: the third frame's reading (1.6) ends the turn
    assert [rid for _, rid in _answers(session)] == ["0", "1", "2"] and session.input_waiting
    session.receive_data(b"".join(
        _frame("SEND", b"m", destination="/queue/q", receipt=f"c{i}") for i in range(5)))
    # a new turn, due at 3.0: the last two timed frames (2.4, 2.8), then the common SENDs,
    # which read no clock
    assert [rid for _, rid in _answers(session)] == ["3", "4"] + [f"c{i}" for i in range(5)]
    assert not session.input_waiting and session.broker.stats("q").message_count == 10


def test_a_time_bound_spent_on_the_last_frame_leaves_nothing_waiting() -> None:
    """A slow full-path frame (a store write on a loaded machine) can spend the turn's
    time with no frame behind it: the session then says nothing waits, so the host does
    not pause a socket and schedule a turn for no frame."""
    session = _session(100)
    now = [0.0]

    def clock() -> float:  # each reading is a whole turn's time later
        now[0] += 2.0
        return now[0]

    session.turn_clock, session.turn_seconds = clock, 1.0
    session.receive_data(_frame("SEND", b"m", destination="/queue/q", persistent="true",
                                receipt="only"))
    assert [rid for _, rid in _answers(session)] == ["only"]
    assert not session.input_waiting
    # half a frame behind the slow one is still input waiting (the host's next turn)
    whole = _frame("SEND", b"m", destination="/queue/q", persistent="true", receipt="b")
    session.receive_data(_frame("SEND", b"m", destination="/queue/q", persistent="true",
                                receipt="a") + whole[:10])
    assert [rid for _, rid in _answers(session)] == ["a"] and session.input_waiting
    session.receive_data(whole[10:])
    assert [rid for _, rid in _answers(session)] == ["b"] and not session.input_waiting


class _Transport(RecordingTransport):
    """Records writes in one log shared by every connection, and its reading state."""

    def __init__(self, name: str, log: list[tuple[str, bytes]]) -> None:
        super().__init__(name, log)
        self.reading = True
        self.pauses = 0
        #: run at each write, its result kept beside the write (what held at that moment)
        self.probe: Any = lambda: None
        self.seen: list[tuple[bytes, Any]] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        super().write(data)
        self.seen.append((bytes(data), self.probe()))

    def pause_reading(self) -> None:
        self.reading = False
        self.pauses += 1

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading


def _client(server: StompServer, name: str, log: list[tuple[str, bytes]]
            ) -> tuple[_Connection, _Transport]:
    conn = _Connection(server)
    conn.session.turn_clock = lambda: 0.0  # time stands still: only the frame count bounds
    transport = _Transport(name, log)
    conn.connection_made(transport)
    conn.data_received(_frame("CONNECT", accept_version="1.2", host="/", heart_beat="0,0"))
    return conn, transport


def _receipts(log: list[tuple[str, bytes]]) -> list[tuple[str, str]]:
    out = []
    for name, data in log:
        parser = _codec.FrameParser("1.2", None, False)
        parser.feed(data)
        out += [(name, f.header("receipt-id")) for f in iter(parser.next_frame, None)
                if f.command == "RECEIPT"]
    return out


def _flood() -> bytes:
    frames = [_frame("SEND", b"x" * 100, destination="/queue/flood", persistent="true")
              for _ in range(FLOOD - 1)]
    frames.append(_frame("SEND", b"x" * 100, destination="/queue/flood", persistent="true",
                         receipt="flood-done"))
    return b"".join(frames)


async def _until_flood_done(log: list[tuple[str, bytes]]) -> int:
    """Loop turns until the flood's last RECEIPT is written; how many it took."""
    for turn in range(1, 10 * FLOOD):
        await asyncio.sleep(0)  # one loop turn: the callbacks queued in the last one run
        if ("flooder", "flood-done") in _receipts(log):
            return turn
    raise AssertionError("the flood's last RECEIPT never came")


def test_another_connections_round_trip_is_answered_while_a_persistent_flood_waits(
    tmp_path: Path,
) -> None:
    """The flooder's whole flood arrives in one read; the prober's persistent SEND in
    the next. The prober's RECEIPT is written after a commit that covers its message,
    before the flood's second batch is acted on, not after the flood."""
    store = SqliteStore(tmp_path / "m.sqlite", group_commit=True)
    broker = Broker(name="turns", store=store)

    async def scenario() -> tuple[int, int, list[tuple[str, str]], list[Any], _Transport]:
        server = StompServer(broker, heartbeat_ms=0)
        log: list[tuple[str, bytes]] = []
        flooder, flooding = _client(server, "flooder", log)
        prober, probing = _client(server, "prober", log)
        probing.probe = lambda: (broker.stats("flood").message_count, store.pending)
        log.clear()
        probing.seen.clear()  # its CONNECTED
        flooder.data_received(_flood())
        after_read = broker.stats("flood").message_count
        assert not flooding.reading  # frames wait in its session: its socket is not read
        prober.data_received(_frame("SEND", b"p", destination="/queue/probe",
                                    persistent="true", receipt="probe"))
        await _until_flood_done(log)
        return after_read, flooding.pauses, _receipts(log), probing.seen, flooding

    after_read, pauses, receipts, seen, flooding = asyncio.run(scenario())
    assert after_read == TURN_FRAMES  # one batch per read
    assert receipts == [("prober", "probe"), ("flooder", "flood-done")]
    ((_, (stored, pending)),) = seen
    assert stored == TURN_FRAMES and not pending  # committed, the flood mostly unread
    assert broker.stats("flood").message_count == FLOOD  # then all of it, nothing lost
    assert flooding.reading and pauses == 1  # read again once its frames were acted on
    broker.close()


def test_a_flooder_held_for_write_back_pressure_stays_unread_after_its_turns() -> None:
    """The turns end when the buffered frames are acted on; reading resumes only if
    nothing else holds it (here the flooder's own socket is congested: it does not read
    what we write), and does once that ends."""
    broker = Broker(name="turns")

    async def scenario() -> tuple[bool, bool, int]:
        server = StompServer(broker, heartbeat_ms=0)
        log: list[tuple[str, bytes]] = []
        flooder, flooding = _client(server, "flooder", log)
        flooder.data_received(_flood())
        flooder.pause_writing()  # its socket congested meanwhile
        await _until_flood_done(log)
        paused_after_turns = not flooding.reading
        flooder.resume_writing()
        return paused_after_turns, flooding.reading, broker.stats("flood").message_count

    assert asyncio.run(scenario()) == (True, True, FLOOD)
    broker.close()
