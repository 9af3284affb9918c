"""A session's listener dispatcher thread: the ready queue, the wake-ups, deferred closes.

JMS makes a session single-threaded: its listeners run one at a time, in order, on one
thread. jmspy gives each session that has listeners its own dispatcher thread, so a slow
``on_message`` holds up only its own session, never the transport's I/O thread, other
sessions, heartbeats or acknowledgements.

Consumers that receive a message while they have a listener put themselves on the
session's ready queue (:meth:`SessionDispatcher._schedule`); the thread pops one consumer
at a time and hands it to the compiled ``drain`` twin (``jmspy/_pure/dispatch.py`` says
how it runs listeners and coalesces AUTO acknowledgements). :class:`~jmspy.session.Session`
inherits this; what acknowledging means is the session's acknowledgement strategy
(``jmspy/acknowledgement.py``).
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from typing import TYPE_CHECKING

from . import twins
from .errors import JMSException
from .reading_lease import woken_list

if TYPE_CHECKING:
    from ._pure.lifecycle import SessionLife
    from .acknowledgement import Acknowledgement
    from .consumer import ListenerType, MessageConsumer
    from .dispatch_protocol import DrainFunction
    from .message import Message
    from .reading_lease import ReadingLease
    from .session_connection import SessionConnection

__all__ = ["SessionDispatcher"]

_drain: DrainFunction = twins.dispatch.drain

#: Seconds an idle dispatcher holding declined acknowledgements waits for a ring before it
#: waits for the broker's lock instead. Blocking on the lock at once, every time drain ran
#: dry while a producer was mid-send, made the two threads trade the lock and the GIL
#: per few messages (vm:// producer + listener: 2.2-2.5x fewer msgs/s, measured); a
#: millisecond is what a processed message may then stay unacknowledged at the broker.
ACK_GRACE = 0.001


class SessionDispatcher:
    """The dispatcher-thread half of a session (state is set up by ``_init_dispatcher``)."""

    _connection: SessionConnection
    _life: SessionLife
    acknowledgement: Acknowledgement

    def _init_dispatcher(self) -> None:
        # _ready, _idle and each consumer's _scheduled are guarded by _dispatch_lock. An
        # idle dispatcher sleeps in _doorbell.get(): a C queue, so waking it is one put,
        # where a Condition's wait and notify ran a few us of Python on both threads for
        # every hand-off (27-30 against 17-24 us of CPU per two-thread round trip here).
        self._dispatch_lock = threading.Lock()
        self._doorbell: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._ready: deque[MessageConsumer] = deque()
        #: the dispatcher found nothing to do and sleeps, or is about to, in _doorbell.get()
        self._idle = False
        self._draining: MessageConsumer | None = None  # consumer the dispatcher works on
        self._thread: threading.Thread | None = None
        self._current: MessageConsumer | None = None
        self._deferred: list[MessageConsumer | None] = []  # None = close the session
        #: the transport's socket reading, lent to this thread (jmspy/reading_lease.py)
        self._lease: ReadingLease | None = None
        #: the dispatcher is idle and reads the socket (with _idle): a ring would not be
        #: heard, it looks at _idle after each batch and poll instead
        self._reading = False

    # -- hooks the session implements -------------------------------------------------
    def _do_close(self) -> None:
        raise NotImplementedError

    def _close_consumer(self, consumer: MessageConsumer) -> None:
        raise NotImplementedError

    # -- what drain calls back (jmspy.dispatch_protocol.DrainSession) --------------------
    def _flush_acks(self, *, wait: bool = True) -> None:
        """The dispatcher's flush: a failure goes to the connection (``_io_failed``), and
        never ends this thread: acknowledgements that could not be written are
        redelivered by the broker, marked redelivered."""
        try:
            self.acknowledgement.flush(wait=wait)
        except Exception as exc:
            self._connection._io_failed(exc, "acknowledging messages")

    def _offer_acks(self) -> None:
        """Drain is leaving: send the queued acknowledgements unless the transport would
        have to wait for another thread; then they stay queued for the next flush, or
        for :meth:`_settle_acks` once the dispatcher has nothing else to do."""
        self._flush_acks(wait=False)

    def _settle_acks(self) -> None:
        """Idle with acknowledgements a busy transport declined: wait up to
        :data:`ACK_GRACE` for a ring (the lock's holder is usually a producer delivering
        to this session: its message is drained next and the flush after it carries the
        queued ones), then send them, waiting for the lock if need be."""
        try:
            self._doorbell.get(timeout=ACK_GRACE)
        except queue.Empty:
            self._flush_acks()

    def _listener_done(self, consumer: MessageConsumer, message: Message, ok: bool) -> None:
        """The listener returned (``ok``) or raised: a failure goes to the exception listener."""
        try:
            self.acknowledgement.processed(consumer, message, ok)
        except Exception as exc:
            self._connection._io_failed(exc, "acknowledging a message")

    def _listener_failed(self, listener: ListenerType, message: Message, exc: Exception) -> None:
        redelivered = self.acknowledgement.redelivers_failures
        self._connection._report(
            JMSException(
                f"message listener {listener!r} raised {type(exc).__name__}: {exc} "
                f"while handling {message.message_id}"
                + ("; the message will be redelivered" if redelivered else ""),
                error_code="LISTENER_FAILED",
            ),
            cause=exc,
        )

    # -- the dispatcher thread ----------------------------------------------------------
    def _ensure_dispatcher(self) -> None:
        with self._dispatch_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._dispatch_loop,
                    name=f"jmspy-session-{id(self):x}",
                    daemon=True,
                )
                self._thread.start()

    def _schedule(self, consumer: MessageConsumer) -> None:
        # Lock-free skips, for a message already pushed into the consumer's buffer:
        # * the dispatcher is taking this consumer's messages right now, and it re-checks
        #   the buffer after clearing _draining (see _dispatch_loop);
        # * the consumer waits in the ready queue: the dispatcher clears _scheduled when
        #   it pops the consumer, under the lock and before it drains, so a True read here
        #   means that drain is still to come and will see the message.
        # Either way the message is never stranded, and a producer delivering in-process
        # (vm://) does not take the dispatch lock for every message it sends.
        if self._draining is consumer or consumer._scheduled:
            return
        with self._dispatch_lock:
            if not consumer._scheduled:
                consumer._scheduled = True
                self._ready.append(consumer)
                if self._idle:
                    self._idle = False  # one ring is enough: it looks at the whole queue
                    if not self._reading:  # (a reading dispatcher sees _idle cleared)
                        self._doorbell.put(None)
                        woken = woken_list()  # a transport's reader may lend it the socket
                        if woken is not None:
                            woken.append(self)

    def _wake(self) -> None:
        """Something an idle dispatcher waits for besides a ready consumer changed (the
        connection started, the session closes): it looks again. A ring it finds nothing
        for only sends it back to sleep."""
        with self._dispatch_lock:
            self._idle = False  # (a dispatcher reading the socket looks at this)
        self._doorbell.put(None)

    # -- the socket reading a transport lends (jmspy/reading_lease.py) -------------------
    def _lend_reading(self, lease: ReadingLease) -> bool:
        """A transport's reading thread offers this thread the reading of its socket
        (after waking it): it reads between listener calls. Refused when closing."""
        with self._dispatch_lock:
            if self._life.closing or self._thread is None or self._lease is not None:
                return False
            self._lease = lease
            if self._idle:  # asleep since the ring: it must look at the lease
                self._idle = False
                self._doorbell.put(None)
        return True

    def _has_work(self) -> bool:
        """For a lease's read(): a ring came (a ready consumer, a start, a close)."""
        return not self._idle or self._life.closing

    def _read_while_idle(self, lease: ReadingLease) -> None:
        try:
            lease.read(self)
        finally:
            still = lease.holds(self)
            with self._dispatch_lock:
                self._reading = False
                if not still:
                    self._lease = None

    def _on_dispatcher_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _dispatch_loop(self) -> None:
        """The thread: :meth:`_dispatch`, then the lent reading (if any) goes back."""
        try:
            self._dispatch()
        finally:
            with self._dispatch_lock:
                lease, self._lease = self._lease, None
                self._reading = False
            if lease is not None:
                lease.give_back(self)

    def _dispatch(self) -> None:
        """Wait for a ready consumer, drain it (jmspy/_pure/dispatch.py), repeat. Idle,
        it reads the socket if a transport lent it the reading, else it sleeps."""
        conn = self._connection
        lock = self._dispatch_lock
        ready = self._ready
        doorbell = self._doorbell
        drain = _drain
        held = self.acknowledgement.held_count
        while True:
            with lock:
                if self._life.closing:
                    return
                consumer: MessageConsumer | None = None
                lease: ReadingLease | None = None
                if ready and conn.started:
                    self._idle = False
                    consumer = ready.popleft()
                    consumer._scheduled = False
                    self._draining = consumer
                else:
                    self._idle = True
                    lease = self._lease
                    self._reading = lease is not None
            if consumer is None:
                if lease is not None:
                    self._read_while_idle(lease)
                elif held():
                    self._settle_acks()  # a ring it takes counts as one here
                else:
                    doorbell.get()  # a ring after the check above is kept: never lost
                continue
            try:
                drain(self, conn, consumer)
            except Exception as exc:  # a transport call under drain (credit, an ack):
                conn._io_failed(exc, "dispatching to a listener")  # this thread lives on
            finally:
                self._draining = None
            if self._deferred:
                self._run_deferred()
                if self._life.closing:
                    return
            # after clearing _draining: deliveries that skipped _schedule are seen here
            if consumer._dispatchable():
                self._schedule(consumer)

    def _run_deferred(self) -> None:
        """Closes requested from inside a listener, done once that listener returned."""
        deferred, self._deferred = self._deferred, []
        for item in deferred:
            if item is None:
                self._do_close()
            else:
                self._close_consumer(item)
        if self._connection._close_deferred_to is self:
            self._connection._finish_close()
