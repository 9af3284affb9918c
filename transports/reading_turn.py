"""Whose turn it is to read a transport connection's socket: its reading thread, or a
session thread or event loop it lent the reading to (``jmspy/reading_lease.py`` says why).

Two transports use it. ``stomp://`` (``transports/stomp/receive.py``): stomp.py's
receiver thread lends to sessions and to event loops. ``mqtt://``
(``transports/mqtt/lent_reading.py``): paho's network thread lends to event loops only,
and takes the turn back when its own work is due (``due``: queued writes, the
keep-alive), which only that thread does. The rules below say "the receiver thread" for
either reading thread.

The rules, all kept by :class:`ReadingTurn` under one lock:

* One thread reads at a time, and a turn changes hands only between batches of frames,
  so frames are processed in the order they arrived (the parser's state goes with it).
* The receiver thread lends the turn after a batch in which it woke an idle session
  (:meth:`ReadingTurn.lend`); it then waits in :meth:`ReadingTurn.wait_home` instead of
  reading, inside stomp.py's receiver loop, which goes on once the turn is back.
* The holder reads between its listener calls (:meth:`ReadingTurn.read`). It keeps the
  turn while it dispatches, because the next frame usually arrives after the listener's
  ACK, when it reads again. If it is still not reading a whole :data:`TICK` later (a slow
  listener, or one waiting for something only a reader can bring), the receiver thread
  takes the turn back; a receipt wait asks for it back at once (:meth:`need_reader`).
* The holder gives the turn back when its session closes, when the socket closes or the
  stream breaks (the receiver thread then raises what stomp.py expects, so the
  disconnect is handled where it always is), and after :data:`IDLE_POLLS` polls without
  a frame (an idle connection then costs no wake-ups until traffic resumes).

An asyncio event loop can hold the turn too (``jmspy/aio/loop_reading.py``): it is
lent the turn like a session, after a batch that woke one of its waiters, and then reads
when the loop sees the socket readable (:meth:`ReadingTurn.read_ready`) instead of in a
blocking :meth:`ReadingTurn.read`. Between those reads it is not busy but waiting, so the
receiver thread takes the turn back only when a frame has waited unread for a whole
:data:`LOOP_TICK` (the loop is stalled), when a thread is about to wait for a RECEIPT
(:meth:`need_reader`: that thread may be the loop's own), or when the socket closes; the
holder is told each time (``_turn_ended``) so it stops watching the descriptor.

What it costs: the receiver thread wakes every :data:`TICK` while the turn is lent, the
holder every :data:`POLL` while it reads an idle socket (at most ~1 s, see above), and
work that another thread queues for a session whose thread is reading (a close, a start,
a client-side redelivery) is seen within :data:`POLL`. Before each sleep in ``poll`` the
holder may poll the socket for up to ``stomp://...?idle_spin_us=`` microseconds (default
100, 0: off): adaptive, so it keeps doing so only while the broker answers within that
window, which grows up to four times as long while answers come just after it on a
connection that takes one message at a time (jmspy/idle_spin.py says what it saves and
what it costs).
"""

from __future__ import annotations

import select
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from jmspy.idle_spin import CONTENDED, READABLE, IdleSpin
from jmspy.reading_lease import LeaseHolder, LoopHolder

from .socket_poll import poll_for

__all__ = ["IDLE_POLLS", "LOOP_TICK", "POLL", "TICK", "ReadingTurn"]

#: polls a socket for a window before sleeping
_poll_for = poll_for
#: times a wait after a missed or skipped window (tests put a fake clock here)
_clock = time.perf_counter

#: Seconds between the receiver thread's looks at a lent turn: a holder not reading for a
#: whole tick (its session is busy in a listener) loses the turn.
TICK = 0.01
#: Seconds a reading holder waits for a frame before it looks for other work.
POLL = 0.02
#: Polls without a frame after which a holder gives the turn back (about a second).
IDLE_POLLS = 50
#: Seconds between the receiver thread's looks at a turn an event loop holds: a frame
#: left unread for this long means the loop is stalled, and the receiver thread reads.
LOOP_TICK = 0.05

#: the holder's state: busy (in a listener), reading, or waiting on its event loop
_BUSY, _READING, _LOOP = 0, 1, 2


class Lendable(LeaseHolder, Protocol):
    """A session that can be lent the reading (``SessionDispatcher._lend_reading``)."""

    def _lend_reading(self, lease: ReadingTurn) -> bool: ...


class ReadingTurn:
    """The turn to read one connection's socket.

    ``read_once()`` reads once and processes the frames (returning the exception the
    reading thread must act on: the socket closed, the stream broke); ``socket_of()`` is
    the socket (None once closed); ``running()`` is the reading thread's loop flag;
    ``due()`` says the reading thread has work of its own (default: never);
    ``sessions=False`` lends to event loops only.
    """

    __slots__ = ("_cond", "_due", "_holder", "_looping", "_pending", "_polled_fd",
                 "_poller", "_read_once", "_running", "_seq", "_sessions", "_socket_of",
                 "_state", "lends", "one_in_flight", "spin")

    def __init__(self, read_once: Callable[[], BaseException | None],
                 socket_of: Callable[[], Any], running: Callable[[], bool],
                 spin: IdleSpin | None = None,
                 one_in_flight: Callable[[], bool] | None = None,
                 due: Callable[[], bool] | None = None, sessions: bool = True) -> None:
        self._read_once = read_once
        self._socket_of = socket_of
        self._running = running
        #: the reading thread has work of its own that only it does (a keep-alive, queued
        #: writes): it takes the turn back from a holder between reads at its next look
        self._due = due or (lambda: False)
        #: whether a session thread may hold the turn (else only an event loop may)
        self._sessions = sessions
        self._cond = threading.Condition(threading.Lock())
        self._holder: LeaseHolder | None = None  # None: stomp.py's receiver thread reads
        self._looping: LoopHolder | None = None  # the holder, when it reads on a loop
        self._state = _BUSY  # the holder's: _READING inside a read, _LOOP or _BUSY between
        self._seq = 0  # counts the holder's reads: a busy holder that read meanwhile keeps it
        self._pending: BaseException | None = None  # for the receiver loop to raise
        self._poller: Any = None
        self._polled_fd = -1
        #: how many times the turn was lent (tests and diagnostics)
        self.lends = 0
        #: whether a holder polls the socket before it sleeps in poll (jmspy/idle_spin.py)
        self.spin = spin if spin is not None else IdleSpin(0)
        #: whether the connection takes one message at a time (request/response): only
        #: then may the spin's window grow (IdleSpin.waited); a streaming consumer's
        #: longer polls would take CPU from the broker that feeds it
        self.one_in_flight = one_in_flight or (lambda: True)

    # -- the receiver thread's side -------------------------------------------------------
    def lent(self) -> bool:
        return self._holder is not None

    def lend(self, woken: list[object]) -> None:
        """After a batch that woke ``woken`` sessions: lend the turn to the first that
        takes it (an idle, open session with a dispatcher thread). Plain sockets only:
        a TLS socket can hold decrypted bytes that ``poll`` does not see."""
        if isinstance(self._socket_of(), ssl.SSLSocket):
            return
        for item in woken:
            if not self._sessions and not hasattr(item, "_turn_ended"):
                continue  # a session thread; this turn goes to event loops only
            session = cast(Lendable, item)
            with self._cond:
                self._holder = session
                self._state = _BUSY
                self._seq += 1
            if session._lend_reading(self):
                self.lends += 1
                return
            with self._cond:
                self._holder = None
                self._looping = None

    def wait_home(self) -> BaseException | None:
        """Wait until the turn is back (given back, or taken back from a holder that was
        busy for a whole tick, or from a loop that left a frame unread for a whole loop
        tick); returns what the holder saw that the receiver loop must raise. Returns
        early once stomp.py stops its loop (a loop holder loses the turn then: the
        socket is closing)."""
        ended: LoopHolder | None = None
        with self._cond:
            seen: tuple[int, int] | None = None
            while self._holder is not None and self._running():
                self._cond.wait(LOOP_TICK if self._state == _LOOP else TICK)
                if self._holder is None:
                    break
                mark = (self._state, self._seq)
                if mark == seen and (self._state == _BUSY
                                     or (self._state == _LOOP and self._unread())):
                    ended = self._drop()  # the receiver thread reads
                    break
                if self._state != _READING and self._due():
                    ended = self._drop()  # the reading thread's own work
                    break
                seen = mark
            else:
                if self._looping is not None:
                    ended = self._drop()
            pending, self._pending = self._pending, None
        if ended is not None:
            ended._turn_ended()
        return pending

    def need_reader(self) -> None:
        """Someone waits for a frame (a RECEIPT): a holder busy in a listener, perhaps
        the very one waiting, loses the turn now rather than after a tick; so does a
        loop between reads (the one waiting may be the loop's own thread)."""
        if self._holder is None:
            return
        with self._cond:
            if self._holder is None or self._state == _READING:
                return
            ended = self._drop()
            self._cond.notify()
        if ended is not None:
            ended._turn_ended()

    def _drop(self) -> LoopHolder | None:
        """(Under the lock.) The turn goes back to the receiver thread; returns the loop
        holder that lost it, to be told outside the lock."""
        self._holder = None
        looping, self._looping = self._looping, None
        return looping

    def _unread(self) -> bool:
        """Bytes wait on the socket, or it closed: a poll, no wait."""
        fd = self.fileno()
        if fd < 0:
            return True
        try:
            return bool(self._poller_for(fd).poll(0))
        except (OSError, ValueError):
            return True

    def _poller_for(self, fd: int) -> Any:
        """The poll object watching ``fd`` for input, made again only when the socket
        changed. Used by one thread at a time: the holder reading (:meth:`_readable`,
        :meth:`read_ready`) or the receiver thread looking at a loop's turn between its
        reads (:meth:`wait_home`), never both, as the holder's state says."""
        if fd != self._polled_fd:
            self._poller = select.poll()
            self._poller.register(fd, select.POLLIN)
            self._polled_fd = fd
        return self._poller

    # -- the holder's side (jmspy.reading_lease.ReadingLease) ------------------------------
    def holds(self, holder: LeaseHolder) -> bool:
        return self._holder is holder

    def give_back(self, holder: LeaseHolder, error: BaseException | None = None) -> None:
        ended = None
        with self._cond:
            if self._holder is holder:
                ended = self._drop()
                if error is not None:
                    self._pending = error
                self._cond.notify()
        if ended is not None:
            ended._turn_ended()

    # -- an event loop's side (jmspy/aio/loop_reading.py) ----------------------------------
    def fileno(self) -> int:
        """The socket's descriptor for a loop to watch (-1: none now)."""
        sock = self._socket_of()
        try:
            return -1 if sock is None else int(sock.fileno())
        except (OSError, ValueError):
            return -1

    def poll_on_loop(self, holder: LoopHolder) -> None:
        """(In ``holder._lend_reading``.) The holder reads when its loop sees the socket
        readable: between its reads it waits, it is not busy."""
        with self._cond:
            if self._holder is holder:
                self._looping = holder
                self._state = _LOOP

    def read_ready(self, holder: LoopHolder) -> bool:
        """(On the loop, the socket readable.) Read once and process the frames, if the
        turn is still ``holder``'s. False: it is not (any more); the loop stops watching.
        The read cannot block: it is made only if the socket is readable now. (The loop
        saw it readable, but the receiver thread may have taken the turn back, read those
        bytes and lent it again before this callback ran.)"""
        with self._cond:
            if self._holder is not holder:
                return False
            self._state = _READING
        error: BaseException | None = None
        keep = self._running()
        try:
            if keep and self._unread():
                try:
                    error = self._read_once()
                except Exception as exc:  # the receiver loop would have raised it
                    error = exc
                keep = error is None
        finally:
            with self._cond:
                if self._holder is holder:
                    self._state = _LOOP
                    self._seq += 1
        if not keep:
            self.give_back(holder, error)
        return keep

    def read(self, holder: LeaseHolder) -> None:
        """Read on the holder's thread until it has other work, or the turn ends."""
        with self._cond:
            if self._holder is not holder:
                return
            self._state = _READING
        empty = 0
        try:
            while True:
                if not self._running():
                    self.give_back(holder)
                    return
                if self._readable():
                    empty = 0
                    try:
                        error = self._read_once()
                    except Exception as exc:  # the receiver loop would have raised it
                        error = exc
                    if error is not None:
                        self.give_back(holder, error)
                        return
                else:
                    empty += 1
                    if empty >= IDLE_POLLS:
                        self.give_back(holder)
                        return
                if holder._has_work():
                    return
        finally:
            with self._cond:
                if self._holder is holder:
                    self._state = _BUSY
                    self._seq += 1

    def _readable(self) -> bool:
        """Wait up to :data:`POLL` for the socket; True also when it is closed or broken
        (reading then tells what happened). Before it sleeps it may poll for the spin's
        window, yielding the CPU between polls (jmspy/idle_spin.py)."""
        fd = self.fileno()
        if fd < 0:
            return True
        try:
            poller = self._poller_for(fd)
            spin = self.spin
            window = spin.window()
            # after a missed window or a skipped one, how long the answer takes sizes the
            # window; not after a contended one (the CPU is wanted) or with polling off
            sizes = spin.enabled
            if window:
                ended = _poll_for(fd, window)
                if ended == READABLE:
                    spin.hit()
                    return True
                if ended == CONTENDED:
                    spin.contended()
                    sizes = False
                else:
                    spin.miss()
            if sizes and not self.one_in_flight():
                spin.settle()
                sizes = False
            start = _clock() if sizes else 0.0
            readable = bool(poller.poll(POLL * 1000))
            if sizes:
                spin.waited(window + _clock() - start)
            return readable
        except (OSError, ValueError):
            return True
