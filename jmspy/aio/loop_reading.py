"""An async connection's event loop reading its ``stomp://`` or ``mqtt://`` socket itself,
while the transport lends it the reading (``jmspy/reading_lease.py``; the transports'
side: ``transports/reading_turn.py``, lent by stomp.py's receiver thread or, over
``mqtt://``, by paho's network thread, ``transports/mqtt/lent_reading.py``).

Why: over ``stomp://`` a frame is read by stomp.py's receiver thread, and a frame an async
task waits for (a RECEIPT that completes ``await producer.send()``, a MESSAGE for
``async for``) is then handed to the loop with ``call_soon_threadsafe``: the receiver
thread wakes, takes the GIL, writes the loop's self-pipe, and the loop wakes. Each await
on the broker pays two wake-ups where an asyncio-native client (aio-pika, stompman) pays
one. Reading on the loop removes the first.

How: when the receiver thread's batch woke one of this connection's waiters, the
transport lends this object the turn (as it lends it to a session thread it woke). The
loop then watches a duplicate of the socket's descriptor with ``add_reader`` and reads
once each time it is readable; every frame is processed on the loop, so waiters resolve
in the same step. The receiver thread keeps watch (``transports/reading_turn.py``):
a frame left unread for ``LOOP_TICK`` (a stalled loop), a thread about to wait for a
RECEIPT (perhaps the loop's own, in a sync call) or the socket closing takes the turn
back, and the loop stops watching. A duplicate descriptor, because the socket may be
closed on another thread before the loop hears that the turn ended: the duplicate keeps
its number from being reused under the loop's watch until the loop closes it.

A transport that lends nothing (``vm://``, stomp.py without the frame reader, paho without
jmspy's block reads, TLS) never calls it; nothing then changes.
"""

from __future__ import annotations

import asyncio
import os
import threading

from jmspy.logs import client_logger
from jmspy.reading_lease import LoopLease, ReadingLease, woken_list

__all__ = ["LoopReading"]

log = client_logger("aio")


class LoopReading:
    """One async connection's side of the lent socket reading, on ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lease: LoopLease | None = None  # loop thread: the lease being watched
        self._fd = -1  # loop thread: the duplicate descriptor the loop watches
        self._closed = False
        self._loop_thread = 0  # learnt on the first registration
        #: times the loop took up a lent turn (tests and diagnostics)
        self.lends = 0
        #: reads the loop made (tests and diagnostics)
        self.reads = 0

    def woke(self) -> None:
        """A waiter of this connection was woken (any thread): if that is a transport's
        reading thread processing a batch, it may lend this loop the reading."""
        woken = woken_list()
        if woken is not None and not self._closed:
            woken.append(self)

    @property
    def holding(self) -> bool:
        """The loop is watching a lent socket now (loop thread)."""
        return self._lease is not None

    def close(self) -> None:
        """(Loop thread.) No more lending: the loop stops watching, the transport reads."""
        self._closed = True
        lease = self._lease
        self._stop_watching()
        if lease is not None:
            lease.give_back(self)

    # -- the lease holder (jmspy.reading_lease.LoopHolder) -------------------------------
    def _has_work(self) -> bool:
        return False  # only asked by a blocking read, which the loop never makes

    def _lend_reading(self, lease: ReadingLease) -> bool:
        """(The transport's reading thread, after a batch.) Take up the turn: duplicate
        the descriptor now, while it is surely the socket's, and watch it on the loop."""
        if self._closed or not isinstance(lease, LoopLease):
            return False
        fd = lease.fileno()
        if fd < 0:
            return False
        try:
            dup = os.dup(fd)
        except OSError:
            return False
        lease.poll_on_loop(self)
        try:
            self._loop.call_soon_threadsafe(self._watch, lease, dup)
        except RuntimeError:  # the loop closed: the receiver thread reads on
            os.close(dup)
            return False
        return True

    def _turn_ended(self) -> None:
        """(Any thread.) The transport took the turn back or it was given back."""
        if threading.get_ident() == self._loop_thread:
            self._forget_lost()
            return
        try:
            self._loop.call_soon_threadsafe(self._forget_lost)
        except RuntimeError:  # the loop closed; its selector went with it
            fd, self._fd = self._fd, -1
            if fd >= 0:
                os.close(fd)

    # -- the loop's side ---------------------------------------------------------------
    def _watch(self, lease: LoopLease, fd: int) -> None:
        self._stop_watching()
        if self._closed or not lease.holds(self):
            os.close(fd)
            if self._closed:
                lease.give_back(self)
            return
        self._loop_thread = threading.get_ident()
        try:
            self._loop.add_reader(fd, self._readable)
        except (OSError, ValueError, RuntimeError) as exc:
            log.debug("the event loop cannot watch the socket (%s): the transport reads", exc)
            os.close(fd)
            lease.give_back(self)
            return
        self._lease, self._fd = lease, fd
        self.lends += 1

    def _readable(self) -> None:
        lease = self._lease
        if lease is None:
            return
        self.reads += 1
        if not lease.read_ready(self):
            self._stop_watching()

    def _forget_lost(self) -> None:
        lease = self._lease
        if lease is not None and not lease.holds(self):
            self._stop_watching()

    def _stop_watching(self) -> None:
        fd, self._fd = self._fd, -1
        self._lease = None
        if fd < 0:
            return
        try:
            self._loop.remove_reader(fd)
        except (OSError, ValueError, RuntimeError):  # a closed loop watches nothing
            pass
        os.close(fd)
