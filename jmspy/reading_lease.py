"""Lending a transport's socket reading to a session's dispatcher thread.

Why: a listener consumer whose broker sends one message at a time (a prefetch window of
1, or a slow producer) pays, per message, for the hand-off from the thread that read the
frame to the session thread that runs the listener: a wake-up and a GIL hand-over on the
path from the MESSAGE to its ACK. Measured over ``stomp://`` with window 1, that hand-off
made jmspy's consumer slower than raw stomp.py, whose listener runs on its reading thread.

What jmspy does instead (a leader/followers arrangement with two threads): when the
transport's reading thread wakes an idle session, it lends that session the reading of
the socket. Between listener calls the session thread reads the socket itself, so the
next message is read by the thread that runs its listener, with no hand-off. Listener
code still runs only on the session thread (DESIGN.md: never on a transport's I/O
thread): while a listener runs the session thread is not reading, and the transport's
own reading thread takes the socket back if that lasts (a receipt wait asks for it at
once; otherwise after a tick or two of the transport's watchdog), so a slow listener
still cannot stop heart-beats, receipts or other sessions' deliveries for long.

This module is the session's side of the arrangement: the :class:`ReadingLease` a
transport hands over, and how a transport learns which sessions its reading thread woke
(:func:`collect_woken`). ``transports/reading_turn.py`` is the transport's side.
A transport that lends nothing (``vm://``) changes nothing here; ``mqtt://`` lends to
event loops only (``transports/mqtt/lent_reading.py``).

An asyncio event loop can be lent the reading the same way (:class:`LoopHolder`,
``jmspy/aio/loop_reading.py``): its waiters record it in the woken list, and it then
reads when the loop sees the socket readable, so a frame for the loop is read on the
loop, with no hand-off from the transport's thread.
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

__all__ = ["LeaseHolder", "LoopHolder", "LoopLease", "ReadingLease", "collect_woken",
           "stop_collecting", "woken_list"]


class LeaseHolder(Protocol):
    """The session dispatcher, as a lease sees it."""

    def _has_work(self) -> bool:
        """Something besides reading is to be done (a ready consumer, a close, a start):
        the lease's :meth:`ReadingLease.read` returns so the thread can do it."""
        ...


class ReadingLease(Protocol):
    """The reading of one transport connection, lent to one session's thread."""

    def read(self, holder: LeaseHolder) -> None:
        """On the holder's thread: read and process frames until the holder has work, the
        lease is given back (idle a while, the socket closed) or it was taken back."""
        ...

    def holds(self, holder: LeaseHolder) -> bool:
        """The lease is still ``holder``'s (the transport did not take it back)."""
        ...

    def give_back(self, holder: LeaseHolder) -> None:
        """The holder stops reading for good (its session closes): the transport reads."""
        ...


class LoopHolder(LeaseHolder, Protocol):
    """An event loop that reads a lent socket when it is readable."""

    def _turn_ended(self) -> None:
        """(Any thread.) The lease ended (taken back, given back, the socket closing):
        the loop stops watching the descriptor."""
        ...


@runtime_checkable
class LoopLease(ReadingLease, Protocol):
    """A lease an event loop can hold: it reads when the loop says the socket is ready."""

    def fileno(self) -> int:
        """The descriptor to watch (-1: none now)."""
        ...

    def poll_on_loop(self, holder: LoopHolder) -> None:
        """(While lending to ``holder``.) It reads on its loop: between reads it waits."""
        ...

    def read_ready(self, holder: LoopHolder) -> bool:
        """(On the loop, the descriptor readable.) Read once and process what came;
        False when the lease is no longer ``holder``'s."""
        ...


class _Woken(threading.local):
    #: the sessions this thread woke while it processed one batch of frames (None: the
    #: thread is not a transport's reading thread in the middle of a batch)
    sessions: list[object] | None = None


_woken = _Woken()


def collect_woken() -> list[object]:
    """A transport's reading thread starts processing a batch: the sessions it wakes
    until :func:`stop_collecting` are appended to the returned list."""
    got: list[object] = []
    _woken.sessions = got
    return got


def stop_collecting() -> None:
    _woken.sessions = None


def woken_list() -> list[object] | None:
    """Where a session woken on this thread records itself (None: nowhere)."""
    return _woken.sessions
