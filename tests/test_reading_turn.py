"""stomp:// lends the socket's reading to a session thread it woke
(transports/reading_turn.py, jmspy/reading_lease.py).

A scripted broker on a loopback socket writes each MESSAGE only after the client ACKed
the one before (a prefetch window of 1), so every test knows which thread can have read
which frame. Which thread read a MESSAGE is recorded where the transport receives it.
Listeners always run on the session thread; what changes is who reads between them.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from library_paths import needs_stomp_hooks
from scripted_stomp import ScriptedBroker

from jmspy import ConnectionFactory, DeliveryMode, JMSException, Session
from jmspy.destinations import Queue
from jmspy.idle_spin import CONTENDED, DEFAULT_IDLE_SPIN_US, QUIET, IdleSpin
from jmspy.transports import reading_turn
from jmspy.transports.reading_turn import ReadingTurn
from jmspy.transports.stomp.transport import StompTransport

SESSION = "jmspy-session-"


@pytest.fixture
def broker() -> Iterator[ScriptedBroker]:
    b = ScriptedBroker()
    yield b
    b.close()


class Readers(list[str]):
    """The name of the thread that read each MESSAGE, in order, and the connection's turn."""

    turn: ReadingTurn | None = None


@pytest.fixture
def readers(monkeypatch: pytest.MonkeyPatch) -> Readers:
    names = Readers()
    original = StompTransport.on_message_frame

    def record(self: StompTransport, headers: dict[str, str], body: bytes) -> None:
        names.append(threading.current_thread().name)
        if self._reader is not None:
            names.turn = self._reader.turn
        original(self, headers, body)

    monkeypatch.setattr(StompTransport, "on_message_frame", record)
    return names


@pytest.fixture
def holder_keeps_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """No watchdog take-back and no idle give-back: a lent turn stays lent until a receipt
    wait, a close or the socket takes it back."""
    monkeypatch.setattr(reading_turn, "TICK", 60.0)
    monkeypatch.setattr(reading_turn, "IDLE_POLLS", 10**6)


def _paced(count: int, before: Callable[[ScriptedBroker, int], None] = lambda b, i: None
           ) -> Callable[[ScriptedBroker], None]:
    """A script writing ``count`` messages, each once the previous one was ACKed."""
    def script(b: ScriptedBroker) -> None:
        for i in range(count):
            before(b, i)
            b.write(b.message(f"m{i}".encode(), i))
            while b.client_frames.get(timeout=30).command != "ACK":
                pass
    return script


def _listen(broker: ScriptedBroker, count: int,
            on_message: Callable[[Any, Session], object] = lambda m, s: None,
            flow_limit: int = 1,
            ) -> tuple[list[str], list[JMSException], Any]:
    """Consume ``count`` messages with a listener (window 1 unless ``flow_limit``,
    individual acks); returns the listener's thread names, the exception listener's
    errors and the (closed) connection."""
    errors: list[JMSException] = []
    threads: list[str] = []
    done = threading.Event()
    conn = ConnectionFactory(f"{broker.url}?heartbeat=0",
                             imqConsumerFlowLimit=flow_limit).create_connection()
    conn.set_exception_listener(errors.append)
    try:
        session = conn.create_session(False, Session.INDIVIDUAL_ACKNOWLEDGE)

        def listener(m: Any) -> None:
            threads.append(threading.current_thread().name)
            on_message(m, session)
            m.acknowledge()
            if len(threads) == count:
                done.set()

        session.create_consumer(Queue("q")).set_message_listener(listener)
        conn.start()
        assert done.wait(30), f"{len(threads)} of {count} messages reached the listener"
    finally:
        conn.close()
    return threads, errors, conn


@needs_stomp_hooks
@pytest.mark.usefixtures("holder_keeps_turn")
def test_after_the_first_message_the_session_thread_reads_the_socket_itself(
    broker: ScriptedBroker, readers: Readers,
) -> None:
    broker.script = _paced(20)
    threads, errors, _ = _listen(broker, 20)
    assert errors == []
    assert all(t.startswith(SESSION) for t in threads)  # listeners: the session thread only
    assert not readers[0].startswith(SESSION)  # stomp.py's receiver woke the session ...
    assert readers[1:] == [threads[0]] * 19  # ... which then read every later message


@needs_stomp_hooks
def test_a_listener_waiting_for_a_receipt_gets_it_while_its_thread_holds_the_turn(
    broker: ScriptedBroker, readers: Readers, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A persistent send inside the listener waits for its RECEIPT, which only a reader
    can bring: the waiting thread gives the turn back at once (with the watchdog's tick
    at a minute, it is the only way the listener could finish). So each MESSAGE is read
    by the receiver thread. It lends the turn for the first one (the session is idle,
    waiting to start); whether it lends it again for a later one depends on whether the
    session thread is back to waiting before that MESSAGE arrives (its listener ACKed the
    one before, which is when the broker writes the next), a race this test leaves alone."""
    monkeypatch.setattr(reading_turn, "TICK", 60.0)

    def send_persistent(m: Any, session: Session) -> None:
        producer = session.create_producer(Queue("out"))
        producer.delivery_mode = DeliveryMode.PERSISTENT
        producer.send(session.create_text_message("reply to " + m.body.decode()))
        producer.close()

    broker.script = _paced(5)
    threads, errors, _ = _listen(broker, 5, send_persistent)
    assert errors == [] and len(threads) == 5
    assert not any(name.startswith(SESSION) for name in readers)
    assert readers.turn is not None and 1 <= readers.turn.lends <= 5


def test_a_listener_busy_past_a_tick_loses_the_turn_and_frames_keep_being_read(
    broker: ScriptedBroker, readers: Readers, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first listener call blocks until the second MESSAGE has been read: only the
    receiver thread, taking the turn back from the busy session thread, can read it."""
    monkeypatch.setattr(reading_turn, "TICK", 0.005)
    second_read = threading.Event()
    original = StompTransport.on_message_frame

    def record(self: StompTransport, headers: dict[str, str], body: bytes) -> None:
        original(self, headers, body)
        if body == b"m1":
            second_read.set()

    monkeypatch.setattr(StompTransport, "on_message_frame", record)

    in_listener = threading.Event()

    def script(b: ScriptedBroker) -> None:
        b.write(b.message(b"m0", 0))
        assert in_listener.wait(30)  # the session thread, lent the turn, runs a listener
        b.write(b.message(b"m1", 1))

    def first_waits(m: Any, session: Session) -> None:
        if m.body == b"m0":
            in_listener.set()
            assert second_read.wait(30), "nobody read the socket while the listener ran"

    broker.script = script
    threads, errors, _ = _listen(broker, 2, first_waits)
    assert errors == [] and len(threads) == 2
    assert second_read.is_set()


@needs_stomp_hooks
def test_an_idle_holder_gives_the_turn_back_and_the_receiver_reads_again(
    broker: ScriptedBroker, readers: Readers, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reading_turn, "TICK", 60.0)
    monkeypatch.setattr(reading_turn, "POLL", 0.005)
    monkeypatch.setattr(reading_turn, "IDLE_POLLS", 2)
    def wait_given_back(b: ScriptedBroker, i: int) -> None:
        if i == 2:  # m1 was read by the holder: it has the turn, until it idles
            assert readers.turn is not None
            while readers.turn.lent():
                time.sleep(0.005)  # the holder's idle polls run out

    broker.script = _paced(4, wait_given_back)
    _, errors, _ = _listen(broker, 4)
    assert errors == []
    assert readers[1].startswith(SESSION)
    assert not readers[2].startswith(SESSION)  # given back: the receiver read m2 ...
    assert readers[3].startswith(SESSION)  # ... and lent the turn again
    assert readers.turn is not None and readers.turn.lends == 2


@needs_stomp_hooks
@pytest.mark.usefixtures("holder_keeps_turn")
def test_the_socket_closing_under_the_holder_reaches_the_exception_listener(
    broker: ScriptedBroker, readers: Readers,
) -> None:
    errors: list[JMSException] = []
    lost = threading.Event()

    def script(b: ScriptedBroker) -> None:
        _paced(2)(b)
        b.close()  # the holder is reading when the socket closes

    broker.script = script
    conn = ConnectionFactory(f"{broker.url}?heartbeat=0",
                             imqConsumerFlowLimit=1).create_connection()

    def on_error(e: JMSException) -> None:
        errors.append(e)
        if e.error_code == "CONNECTION_LOST":
            lost.set()

    conn.set_exception_listener(on_error)
    try:
        session = conn.create_session(False, Session.INDIVIDUAL_ACKNOWLEDGE)
        session.create_consumer(Queue("q")).set_message_listener(lambda m: m.acknowledge())
        conn.start()
        assert lost.wait(30), [str(e) for e in errors]
    finally:
        conn.close()
    assert readers[1].startswith(SESSION)


@needs_stomp_hooks
@pytest.mark.usefixtures("holder_keeps_turn")
def test_closing_the_connection_while_its_session_thread_reads_returns(
    broker: ScriptedBroker, readers: Readers,
) -> None:
    session_threads: list[threading.Thread] = []
    broker.script = _paced(3)
    _, errors, conn = _listen(  # closes the connection at the end
        broker, 3, lambda m, s: session_threads.append(threading.current_thread()))
    assert errors == [] and conn.closed
    assert readers[-1].startswith(SESSION)  # it had the turn when close() came
    session_threads[0].join(30)
    assert not session_threads[0].is_alive()


# -- the turn itself -----------------------------------------------------------------------
class _Holder:
    def __init__(self) -> None:
        self.work = False

    def _has_work(self) -> bool:
        return self.work

    def _lend_reading(self, lease: ReadingTurn) -> bool:
        return True


def _turn(read_once: Callable[[], BaseException | None] = lambda: None) -> ReadingTurn:
    return ReadingTurn(read_once, lambda: None, lambda: True)


def test_need_reader_takes_the_turn_from_a_busy_holder_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reading_turn, "TICK", 60.0)
    turn, holder = _turn(), _Holder()
    turn.lend([holder])
    assert turn.lent() and turn.holds(holder)
    home = threading.Thread(target=turn.wait_home)
    home.start()
    turn.need_reader()  # the holder is busy (not in read()): the receiver gets it back
    home.join(30)
    assert not home.is_alive() and not turn.lent()


def test_need_reader_leaves_a_reading_holder_alone() -> None:
    in_read = threading.Event()
    release = threading.Event()

    def read_once() -> None:
        in_read.set()
        release.wait(30)
        return None

    turn, holder = _turn(read_once), _Holder()
    turn.lend([holder])
    reading = threading.Thread(target=turn.read, args=(holder,))
    reading.start()
    assert in_read.wait(30)
    turn.need_reader()
    assert turn.holds(holder)  # it reads: the frame a waiter needs comes through it
    holder.work = True
    release.set()
    reading.join(30)
    assert turn.holds(holder)  # it returned for its work and keeps the turn


def test_a_busy_holder_keeps_the_turn_for_a_tick_then_loses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reading_turn, "TICK", 0.005)
    turn, holder = _turn(), _Holder()
    turn.lend([holder])
    got: list[BaseException | None] = []
    home = threading.Thread(target=lambda: got.append(turn.wait_home()))
    home.start()
    home.join(30)  # returns once it took the turn back from the busy holder
    assert not home.is_alive() and got == [None]
    assert not turn.lent() and not turn.holds(holder)
    holder.work = True
    turn.read(holder)  # the old holder's read finds the turn gone and reads nothing


def test_what_the_holder_read_that_ends_the_connection_is_raised_by_the_receiver() -> None:
    closed = ConnectionError("the socket closed")
    turn, holder = _turn(lambda: closed), _Holder()
    turn.lend([holder])
    turn.read(holder)
    assert not turn.lent()
    assert turn.wait_home() is closed


def test_a_session_that_refuses_is_not_lent_the_turn() -> None:
    class Closing(_Holder):
        def _lend_reading(self, lease: ReadingTurn) -> bool:
            return False

    turn = _turn()
    turn.lend([Closing()])
    assert not turn.lent() and turn.lends == 0
    taker = _Holder()
    turn.lend([Closing(), taker])  # the next woken session takes it
    assert turn.holds(taker) and turn.lends == 1


# -- polling before sleeping (jmspy/idle_spin.py) ------------------------------------------
class _Socket:
    """One end of a socketpair as the turn's socket; the other end writes frames."""

    def __init__(self) -> None:
        self.mine, self.peer = socket.socketpair()
        self.reads = 0

    def read_once(self) -> None:
        self.mine.recv(4096)
        self.reads += 1

    def close(self) -> None:
        self.mine.close()
        self.peer.close()


@pytest.fixture
def pair() -> Iterator[_Socket]:
    s = _Socket()
    yield s
    s.close()


def _spinning_turn(pair: _Socket, window_us: int = 100,
                   one_in_flight: Callable[[], bool] | None = None,
                   ) -> tuple[ReadingTurn, _Holder]:
    turn = ReadingTurn(pair.read_once, lambda: pair.mine, lambda: True, IdleSpin(window_us),
                       one_in_flight)
    holder = _Holder()
    holder.work = True  # read() returns after one look at the socket
    turn.lend([holder])
    return turn, holder


def test_a_frame_waiting_when_the_holder_looks_is_a_hit_and_read_without_sleeping(
    pair: _Socket,
) -> None:
    turn, holder = _spinning_turn(pair)
    pair.peer.sendall(b"MESSAGE\n\n\0")
    turn.read(holder)
    assert pair.reads == 1
    assert (turn.spin.hits, turn.spin.misses) == (1, 0)


def test_a_window_without_a_frame_is_a_miss_and_the_next_wait_sleeps_at_once(
    pair: _Socket, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reading_turn, "POLL", 0.001)  # each empty look sleeps 1 ms
    turn, holder = _spinning_turn(pair)
    seen = []
    for _ in range(4):
        turn.read(holder)  # nothing ever arrives
        # a window ends as a miss, or contended if a yield in it ran another thread;
        # the waits after it sleep the same either way
        seen.append(turn.spin.misses + turn.spin.contentions)
    # miss, skip one wait, miss (now skipping two), skip
    assert seen == [1, 1, 2, 2]
    assert pair.reads == 0 and turn.spin.hits == 0
    # each wait lasted its 1 ms poll, past four windows: the window did not grow
    assert turn.spin.grown == 0 and turn.spin.window_s == pytest.approx(100e-6)


def test_an_answer_soon_after_a_missed_window_doubles_the_window(
    pair: _Socket, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wait after a miss is timed (a fake clock here: 150 us); within four windows
    of the start, a longer window would have caught it."""
    ticks = iter([10.0, 10.0 + 150e-6])
    monkeypatch.setattr(reading_turn, "_clock", lambda: next(ticks))
    turn, holder = _spinning_turn(pair)
    _window_ends_then_a_frame(turn, holder, pair, monkeypatch, QUIET)
    assert (turn.spin.misses, turn.spin.grown) == (1, 1)
    assert turn.spin.window_s == pytest.approx(200e-6)


def _window_ends_then_a_frame(turn: ReadingTurn, holder: _Holder, pair: _Socket,
                              monkeypatch: pytest.MonkeyPatch, ended: int) -> None:
    """The holder's window ends as ``ended`` says (a fake poll); the frame waiting by
    then is read by the wait that follows, at once."""
    monkeypatch.setattr(reading_turn, "_poll_for", lambda fd, window: ended)
    reads = pair.reads
    pair.peer.sendall(b"MESSAGE\n\n\0")
    turn.read(holder)
    assert pair.reads == reads + 1


def test_a_connection_that_starts_streaming_goes_back_to_the_configured_window(
    pair: _Socket, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Growing is for one message at a time: with more in flight, frames come in runs,
    and a longer poll between runs only takes CPU from the broker feeding them."""
    monkeypatch.setattr(reading_turn, "_clock", lambda: 10.0)  # the answer "at once"
    streaming = [False]
    turn, holder = _spinning_turn(pair, one_in_flight=lambda: streaming[0] is False)
    _window_ends_then_a_frame(turn, holder, pair, monkeypatch, QUIET)
    assert turn.spin.window_s == pytest.approx(200e-6)  # one at a time: it grew
    streaming[0] = True  # a window-1000 subscription joins
    # the next miss puts the window back to the configured one
    _window_ends_then_a_frame(turn, holder, pair, monkeypatch, QUIET)
    assert turn.spin.grown == 1
    assert turn.spin.window_s == pytest.approx(100e-6)


@needs_stomp_hooks
@pytest.mark.usefixtures("holder_keeps_turn")
@pytest.mark.parametrize(("flow_limit", "one_at_a_time"), [(1, True), (1000, False)])
def test_a_connection_takes_one_message_at_a_time_only_while_its_window_is_one(
    broker: ScriptedBroker, readers: Readers, flow_limit: int, one_at_a_time: bool,
) -> None:
    seen: list[bool] = []
    broker.script = _paced(3)

    def look(message: Any, session: Session) -> None:
        assert readers.turn is not None
        seen.append(readers.turn.one_in_flight())

    _, errors, _ = _listen(broker, 3, look, flow_limit=flow_limit)
    assert errors == []
    assert seen == [one_at_a_time] * 3


def test_a_contended_window_does_not_grow_the_window(
    pair: _Socket, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reading_turn, "_clock", lambda: 10.0)  # the answer "at once"
    turn, holder = _spinning_turn(pair)
    _window_ends_then_a_frame(turn, holder, pair, monkeypatch, CONTENDED)
    assert (turn.spin.contentions, turn.spin.grown) == (1, 0)
    assert turn.spin.window_s == pytest.approx(100e-6)


def test_with_the_window_at_zero_the_holder_never_polls_first(
    pair: _Socket, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reading_turn, "POLL", 0.001)
    turn, holder = _spinning_turn(pair, window_us=0)
    turn.read(holder)
    pair.peer.sendall(b"MESSAGE\n\n\0")
    turn.read(holder)
    assert pair.reads == 1 and (turn.spin.hits, turn.spin.misses) == (0, 0)


def test_the_url_sets_the_window_and_refuses_one_out_of_range() -> None:
    from urllib.parse import urlsplit

    from jmspy.errors import InvalidConfigurationException
    from jmspy.transports.stomp.connect import ConnectOptions

    def window(query: str) -> int:
        return ConnectOptions.parse(urlsplit(f"stomp://127.0.0.1:61613{query}"),
                                    {}).idle_spin_us

    assert window("") == DEFAULT_IDLE_SPIN_US
    assert window("?idle_spin_us=0") == 0
    assert window("?idle_spin_us=1000") == 1000
    for bad in ("1001", "-5", "ten"):
        with pytest.raises(InvalidConfigurationException,
                           match=rf"idle_spin_us='{bad}'.*microseconds.*at most 1000"):
            window(f"?idle_spin_us={bad}")
