"""The one thread an async consumer owns: it waits on the consumer's prefetch buffer and
tells the event loop, with ``loop.call_soon_threadsafe``, that a message is ready.

Why a thread that only *signals*: the sync core's consumer already has the buffer, bounded
by the flow window, that the transport fills on its own thread. A second queue on the loop
side would hold messages the broker counts as delivered (unbounded, as aio-pika's, or
dropping, as aiomqtt's), and a waiter that took a message would strand it when its task
is cancelled. Here the thread waits with ``MessageConsumer.wait_ready`` and takes
nothing; the loop takes the message itself with ``take_no_wait``, in the same step that
hands it to the application, so no await point lies between the two.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

from jmspy.logs import client_logger

if TYPE_CHECKING:
    from jmspy.consumer import MessageConsumer

__all__ = ["ReadyWaiter"]

log = client_logger("aio")


class ReadyWaiter:
    """Waits, on its own daemon thread, until ``consumer`` has a message to take.

    :meth:`ready` (loop thread) returns a future that resolves to True when a message is
    ready or False once the consumer, its session or its connection ended; concurrent
    callers share one future, and a caller that stops waiting (cancelled, timed out)
    leaves it to the others. The thread is daemon, so a loop that ends without closing
    its connection does not hold up the interpreter's exit."""

    def __init__(self, consumer: MessageConsumer, loop: asyncio.AbstractEventLoop) -> None:
        self._consumer = consumer
        self._loop = loop
        self._cond = threading.Condition()
        self._request: asyncio.Future[bool] | None = None  # guarded by _cond
        self._current: asyncio.Future[bool] | None = None  # loop thread only
        self._stopped = False
        self._thread: threading.Thread | None = None

    def ready(self) -> asyncio.Future[bool]:
        """The future of the next readiness (loop thread only)."""
        current = self._current
        if current is not None and not current.done():
            return current
        future: asyncio.Future[bool] = self._loop.create_future()
        self._current = future
        with self._cond:
            if self._stopped:
                future.set_result(False)
                return future
            self._request = future
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"jmspy-aio-{self._consumer.consumer_id}",
                    daemon=True)
                self._thread.start()
            self._cond.notify()
        return future

    def stop(self) -> None:
        """No more waiting (the consumer closes, which also wakes a running wait)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._request is None and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    future, self._request = self._request, None
                    if future is not None:
                        self._hand(future, False, None)
                    return
                future, self._request = self._request, None
            assert future is not None
            try:
                ready = self._consumer.wait_ready(None)
            except BaseException as exc:  # the connection is lost: the loop raises it
                self._hand(future, False, exc)
                continue
            if not self._hand(future, ready, None):
                return

    def _hand(self, future: asyncio.Future[bool], ready: bool, error: BaseException | None
              ) -> bool:
        """Resolve ``future`` on its loop; False when the loop is gone (stop waiting)."""
        try:
            self._loop.call_soon_threadsafe(_resolve, future, ready, error)
        except RuntimeError:  # the loop closed under us: nobody is waiting any more
            log.debug("aio waiter for consumer %s: its event loop closed",
                      self._consumer.consumer_id)
            return False
        return True


def _resolve(future: asyncio.Future[bool], ready: bool, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
        # a waiter that was cancelled meanwhile never reads it: the next receive() meets
        # the same loss itself, so the future's copy is not reported as unretrieved
        future.add_done_callback(_retrieve)
    else:
        future.set_result(ready)


def _retrieve(future: asyncio.Future[bool]) -> None:
    future.exception()
