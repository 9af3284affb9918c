"""The fields a :class:`~jmspy.consumer.MessageConsumer` shares with its session and
flow control, and its hand-off of deliveries.

``_deliver_many`` runs once per run of deliveries on the transport's thread; over
``vm://`` that is the producer's own thread, once per message sent while the consumer
keeps up, so its Python frame and lock round trip were paid by every send.
``MessageConsumer`` derives from :class:`ConsumerCore` and keeps everything else. It had
a compiled twin (``cython_ext/consumer_core.pyx``, the fields as C members and
``push_many`` called in C), retired by the twin ledger's rule (benchmarks/README.md):
with it pure, part (a)'s ``vm://`` workload ran 0.94x as fast end to end and 0.99x on
the listener path (21 paired rounds), ``--over stomp`` 0.94x and 1.10x.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from jmspy.logs import client_logger

if TYPE_CHECKING:
    from jmspy.message import Message
    from jmspy.owners import ConsumerSession
    from jmspy.prefetch_protocol import PrefetchBufferProtocol

__all__ = ["FIELDS", "ConsumerCore", "Watchers", "call_watchers"]

log = client_logger("consumer")

#: The consumer's state, one slot each (``__slots__``: no per-instance dict on the
#: delivery path); the subclass sets every one in its ``__init__``.
FIELDS: Final = (
    "_session",
    "_lock",
    "_cond",
    "_buffer",
    "_listener",
    "_closed",
    "_scheduled",
    "_receiving",
    "_watchers",
)

#: What :meth:`ConsumerCore._wake` hands back: the one-shot watchers to call after the
#: lock (see ``MessageConsumer.call_when_ready``), or None.
Watchers = list[Callable[[], None]] | None


class ConsumerCore:
    """A consumer's lock, buffer, listener and state; ``_deliver_many``. The subclass
    sets every field in its ``__init__``."""

    __slots__ = FIELDS

    _session: ConsumerSession[Any]
    _lock: threading.Lock
    #: wakes a thread blocked in receive() (on ``_lock``)
    _cond: threading.Condition
    _buffer: PrefetchBufferProtocol
    _listener: Any
    _closed: bool
    #: waits in the session's ready queue (guarded by the session's dispatch lock)
    _scheduled: bool
    #: how many threads are blocked in receive()
    _receiving: int
    #: callbacks waiting, without a thread, for a message or the end (an event loop's)
    _watchers: Watchers

    def _wake(self) -> Watchers:
        """Under ``_lock``: wake every blocked receiver and take the watchers, which the
        caller calls once it let go of the lock (:func:`call_watchers`)."""
        self._cond.notify_all()
        watchers, self._watchers = self._watchers, None
        return watchers

    def _deliver_many(self, messages: list[Message]) -> None:
        """Buffer a run of messages under one lock round trip and wake their reader."""
        watchers: Watchers = None
        with self._lock:
            if self._closed:
                # Late delivery after close: the broker has it as delivered; the close
                # path cancels everything unacknowledged, so just drop our copy.
                return
            self._buffer.push_many(messages)
            has_listener = self._listener is not None
            if not has_listener:
                if self._receiving:
                    self._cond.notify()
                watchers = self._watchers
                if watchers is not None:
                    self._watchers = None
        if watchers is not None:
            call_watchers(watchers)
        if has_listener and not self._scheduled:
            # Already in the session's ready queue (_scheduled, read without the lock as
            # the session's _schedule reads it): the drain still to come sees this run.
            # Over vm:// that is most runs while the listener keeps up, and the call is
            # one Python frame per message sent. (Only a MessageConsumer is made of this.)
            self._session._schedule(self)


def call_watchers(watchers: Watchers) -> None:
    """Call what :meth:`ConsumerCore._wake` took (outside the consumer's lock: a watcher
    may look at the consumer again)."""
    for watcher in watchers or ():
        try:
            watcher()
        except Exception:  # a delivery must not fail for a watcher: say it, go on
            log.exception("a consumer's ready watcher raised")
