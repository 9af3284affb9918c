"""How an async consumer waits for its next message: a watcher on the sync consumer that
wakes the event loop, and no thread of its own.

Why nothing more: the sync core's consumer already has the buffer, bounded by the flow
window, that the transport fills. A second queue on the loop side would hold messages
the broker counts as delivered (unbounded, as aio-pika's, or dropping, as aiomqtt's),
and a waiter that took a message would strand it when its task is cancelled. So the
waiter takes nothing: :meth:`MessageConsumer.call_when_ready
<jmspy.consumer.MessageConsumer.call_when_ready>` calls it back on the thread that made a
message ready (the transport's, or this loop's own when the sender runs on it, as over
``vm://``), it resolves a future on the loop, and the loop takes the message itself with
``take_no_wait``, in the same step that hands it to the application, so no await point
lies between the two.

It used to be a thread per consumer blocked in ``wait_ready`` that then called the loop:
two thread switches for every message that found the buffer empty (about 140 us each on
a 2-vCPU VM), where the watcher costs the one into the loop, or none when the message
came from the loop's own thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

from jmspy.logs import client_logger

if TYPE_CHECKING:
    from jmspy.consumer import MessageConsumer

    from .loop_reading import LoopReading

__all__ = ["ReadyWaiter"]

log = client_logger("aio")


class ReadyWaiter:
    """The readiness of ``consumer``'s next message, as futures of ``loop``.

    :meth:`ready` (loop thread) returns a future that resolves to True when a message may
    be ready or the consumer, its session or its connection ended or was lost (the
    caller looks: ``take_no_wait`` returns it, or raises the loss); concurrent callers
    share one future, and a caller that stops waiting (cancelled, timed out) leaves it to
    the others, its watcher left to fire into a future nobody awaits."""

    def __init__(self, consumer: MessageConsumer, loop: asyncio.AbstractEventLoop,
                 reading: LoopReading) -> None:
        self._consumer = consumer
        self._loop = loop
        self._reading = reading
        self._loop_thread = 0  # the loop's thread, learnt in ready()
        self._current: asyncio.Future[bool] | None = None  # loop thread only
        self._stopped = False

    def ready(self) -> asyncio.Future[bool]:
        """The future of the next readiness (loop thread only)."""
        current = self._current
        if current is not None and not current.done():
            return current
        future: asyncio.Future[bool] = self._loop.create_future()
        self._current = future
        self._loop_thread = threading.get_ident()
        if self._stopped or not self._consumer.call_when_ready(self._woken):
            future.set_result(not self._stopped)  # so already: look again now
        return future

    def stop(self) -> None:
        """No more waiting (loop thread): a pending future resolves False."""
        self._stopped = True
        current = self._current
        if current is not None and not current.done():
            current.set_result(False)

    def _woken(self) -> None:
        """The consumer's watcher (any thread): resolve the current future on the loop."""
        if threading.get_ident() == self._loop_thread:
            self._loop.call_soon(self._resolve)
            return
        self._reading.woke()  # a transport's reader may lend the loop its socket
        try:
            self._loop.call_soon_threadsafe(self._resolve)
        except RuntimeError:  # the loop closed under us: nobody is waiting any more
            log.debug("aio waiter for consumer %s: its event loop closed",
                      self._consumer.consumer_id)

    def _resolve(self) -> None:
        current = self._current
        if current is not None and not current.done():
            current.set_result(True)
