"""Async consumers, listeners and browsers: ``await consumer.receive()``, ``async for``,
``consumer.set_message_listener(async_fn)``, ``async for message in browser``.

Nothing here buffers, acknowledges or counts credit: the sync core's
:class:`~jmspy.consumer.MessageConsumer` does all of it, so its prefetch buffer (bounded by
``imqConsumerFlowLimit``) is the only buffer and a slow ``async for`` body is felt by the
broker as credit it does not get. A :class:`~jmspy.aio.waiter.ReadyWaiter` tells the
loop when a message is ready (a watcher on the sync consumer, no thread); the loop takes
it and hands it to the application in one step, so a task cancelled at any await point
leaves every message either untaken (in the buffer, in order) or handed over.

In AUTO_ACKNOWLEDGE (and DUPS_OK) a message handed out is acknowledged when the next one
is asked for, or when its ``async with message.process():`` block ends, so a body that
fails inside ``process()`` has it redelivered, marked. The acknowledgement and the credit
it refills are frames written, bounded steps on the loop; what may wait for the broker
(a redelivery's cancel, closing, recover) runs on a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from jmspy.acknowledgement import AckMode
from jmspy.errors import IllegalStateException, JMSException
from jmspy.logs import client_logger

from .message import AsyncMessage
from .waiter import ReadyWaiter

if TYPE_CHECKING:
    from jmspy.consumer import MessageConsumer, QueueBrowser
    from jmspy.destinations import Destination, Queue
    from jmspy.flow import FlowStats
    from jmspy.message import Message

    from .owners import ConsumerOwner

__all__ = ["AsyncListener", "AsyncMessageConsumer", "AsyncQueueBrowser"]

log = client_logger("aio")

#: An async message listener: ``async def on_message(message: AsyncMessage) -> None``.
AsyncListener = Callable[[AsyncMessage], Awaitable[object]]

#: After this many messages taken without waiting, ``receive()`` yields to the loop once:
#: a flood that keeps the buffer full would otherwise let one ``async for`` whose body
#: never awaits hold the loop for as long as messages keep coming.
FAIRNESS = 32

_REDELIVERS = frozenset({AckMode.AUTO_ACKNOWLEDGE, AckMode.DUPS_OK_ACKNOWLEDGE})
_CLIENT = frozenset({AckMode.CLIENT_ACKNOWLEDGE, AckMode.INDIVIDUAL_ACKNOWLEDGE})


class AsyncMessageConsumer:
    """Receives messages from one destination on the event loop.

    ``async for message in consumer`` waits for each message for as long as it takes and
    ends when the consumer, its session or its connection closes (from any task); a
    connection lost for good raises its ``JMSException``, so a loop never ends silently
    on a failure. While the connection reconnects the loop simply waits."""

    def __init__(self, session: ConsumerOwner, consumer: MessageConsumer) -> None:
        self._session = session
        #: the sync core's consumer (its buffer, flow window and acknowledgement)
        self.sync = consumer
        self._waiter = ReadyWaiter(consumer, session.loop, session._connection._reading)
        #: handed to the application, not yet settled (AUTO: acked by the next receive)
        self._pending: Message | None = None
        self._streak = 0
        self._listener: AsyncListener | None = None
        self._listener_task: asyncio.Task[None] | None = None
        self._in_handler = False

    @property
    def destination(self) -> Destination:
        return self.sync.destination

    @property
    def selector(self) -> str | None:
        return self.sync.selector

    @property
    def closed(self) -> bool:
        return self.sync.closed

    def flow_stats(self) -> FlowStats:
        """The same counters as the sync consumer's (``buffered + taken ≤ limit``)."""
        return self.sync.flow_stats()

    # -- receiving ---------------------------------------------------------------------
    async def receive(self, timeout: float | None = None) -> AsyncMessage | None:
        """The next message, waiting up to ``timeout`` seconds (None: for ever).

        Returns None on timeout or when the consumer is closed while waiting. Cancelling
        the awaiting task (or an ``asyncio.timeout()`` around it) loses nothing: no
        message is taken from the buffer until the step that returns it."""
        self._check_receivable()
        message = self._take_ready()
        if message is not None:
            return message
        return await self._next(timeout)

    def receive_no_wait(self) -> AsyncMessage | None:
        """A message if one is buffered now, else None (no await needed)."""
        self._check_receivable()
        self._settle_pending()
        message = self.sync.take_no_wait()
        return None if message is None else self._hand_out(message)

    def messages(self, timeout: float | None = None) -> AsyncIterator[AsyncMessage]:
        """Iterate, each step a ``receive(timeout)``: ``timeout`` is an idle limit, not a
        bound on the whole loop (as the sync ``consumer.messages(timeout)``)."""
        return _Messages(self, timeout)

    def __aiter__(self) -> AsyncIterator[AsyncMessage]:
        return _Messages(self, None)

    def _take_ready(self) -> AsyncMessage | None:
        """The next message if one is ready now and this consumer's streak leaves room
        (else None: :meth:`_next` waits, or yields for fairness first). No await lies
        between taking it and handing it out, so nothing can strand it."""
        if self._streak >= FAIRNESS:
            return None
        self._settle_pending()
        try:
            message = self.sync.take_no_wait()
        except IllegalStateException:
            return None  # closed: _next says how it ended
        if message is None:
            return None
        self._streak += 1
        return self._hand_out(message)

    def _hand_out(self, message: Message) -> AsyncMessage:
        """``message`` goes to the application: it is the one the next step settles."""
        self._pending = message
        return AsyncMessage(message, self)

    async def _next(self, timeout: float | None) -> AsyncMessage | None:
        self._settle_pending()
        loop = self._session.loop
        deadline = None if timeout is None else loop.time() + max(0.0, timeout)
        if self._streak >= FAIRNESS:  # before taking: a cancel here strands nothing
            self._streak = 0
            await asyncio.sleep(0)
        waited = False
        while True:
            try:
                message = self.sync.take_no_wait()
            except IllegalStateException:
                if waited and self.sync.ended:  # closed while we waited
                    return None
                raise
            if message is not None:
                self._streak += 1
                return self._hand_out(message)
            if self.sync.ended:
                return None
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return None
            if not waited:
                # One turn of the loop before a watcher: a producer on this loop (vm://
                # sends run on it) may fill the buffer in it, with no future to make.
                waited = True
                await asyncio.sleep(0)
                continue
            ready = self._waiter.ready()
            self._streak = 0
            await asyncio.wait((ready,), timeout=remaining)
            if ready.done() and not ready.result():
                return None  # closing: the consumer, its session or its connection

    def _check_receivable(self) -> None:
        if self._listener is not None:
            raise IllegalStateException(
                "receive() called on a consumer that has a message listener; a consumer "
                "is either synchronous or asynchronous: set_message_listener(None) first")

    # -- settling (AsyncMessage calls these) -------------------------------------------
    def _settle_pending(self) -> None:
        message, self._pending = self._pending, None
        if message is not None:
            self.sync.settle(message, True)

    def _settle_if_pending(self, message: Message) -> None:
        if self._pending is message:
            self._pending = None
            self.sync.settle(message, True)

    async def _succeeded(self, message: Message) -> None:
        self._settle_if_pending(message)
        if self._session.ack_mode in _CLIENT:
            message.acknowledge()

    async def _failed(self, message: Message) -> None:
        mode = self._session.ack_mode
        if self._pending is message:
            self._pending = None
            if mode in _REDELIVERS:
                await self._session._run(self.sync.settle, message, False)
                return
            self.sync.settle(message, True)  # delivered; the mode's call settles it
        if mode in _CLIENT:
            await self._session.recover()
        elif mode is AckMode.SESSION_TRANSACTED:
            await self._session.rollback()

    # -- listeners ---------------------------------------------------------------------
    @property
    def message_listener(self) -> AsyncListener | None:
        return self._listener

    def set_message_listener(self, listener: AsyncListener | None) -> None:
        """Deliver each message to ``await listener(message)`` on this loop, one at a
        time per session (JMS: a session's listeners never run concurrently). The
        message is settled when the listener returns, as a sync listener's is: a
        listener that raises has it redelivered in AUTO_ACKNOWLEDGE and DUPS_OK, and the
        connection's exception listener hears of it. ``None`` goes back to ``receive()``
        after the message being handled (if any)."""
        if self.sync.ended:
            raise IllegalStateException(
                f"{self!r} is closed; create a new one with session.create_consumer()")
        if listener is not None and not callable(listener):
            raise IllegalStateException(f"message listener {listener!r} is not callable")
        if asyncio.get_running_loop() is not self._session.loop:
            raise IllegalStateException(
                "set_message_listener() must be called on the event loop the "
                "connection was opened on")
        self._listener = listener
        task = self._listener_task
        if listener is None:
            if task is not None and not self._in_handler:
                task.cancel()  # waiting for a message: nothing is taken yet
            self._listener_task = None
        elif task is None or task.done():
            self._listener_task = self._session.loop.create_task(
                self._listen(), name=f"jmspy listener of consumer {self.sync.consumer_id}")

    async def _listen(self) -> None:
        while self._listener is not None:
            try:
                received = await self._next(None)
            except JMSException as exc:
                self._session._connection._report(exc)
                return
            listener = self._listener
            if received is None:
                return
            if listener is None:  # switched off while we waited: keep it for receive()
                return
            message = received.message
            ok = True
            async with self._session._dispatch_lock:
                self._in_handler = True
                try:
                    await listener(received)
                except Exception as exc:
                    ok = False
                    self._session._connection._listener_failed(
                        listener, message, exc, self._session.ack_mode in _REDELIVERS)
                finally:
                    self._in_handler = False
                if self._pending is message:
                    if ok or self._session.ack_mode not in _REDELIVERS:
                        self._settle_pending()
                    else:
                        self._pending = None
                        await self._session._run(self.sync.settle, message, False)

    # -- closing -----------------------------------------------------------------------
    async def close(self) -> None:
        """Stop the consumer; unconsumed messages go back to the broker for redelivery.
        A message handed out and not yet settled counts as processed (AUTO_ACKNOWLEDGE
        acknowledges it now, as the sync ``receive()`` would have on returning it)."""
        await self._stop_listening()
        self._settle_pending()
        self._waiter.stop()
        await self._session._run(self.sync.close)

    async def _stop_listening(self) -> None:
        """Switch the listener off and wait for the message it is handling (if any)."""
        task, self._listener_task = self._listener_task, None
        self._listener = None
        if task is not None and not task.done() and task is not asyncio.current_task():
            if not self._in_handler:
                task.cancel()
            await asyncio.wait((task,))

    async def __aenter__(self) -> AsyncMessageConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncMessageConsumer {self.sync.consumer_id} on {self.sync.destination}>"


class _Messages:
    """``async for`` over a consumer: each step one ``receive(timeout)``; it ends on a
    timeout or when the consumer, its session or its connection closes."""

    __slots__ = ("_consumer", "_timeout")

    def __init__(self, consumer: AsyncMessageConsumer, timeout: float | None) -> None:
        self._consumer = consumer
        self._timeout = timeout

    def __aiter__(self) -> _Messages:
        return self

    async def __anext__(self) -> AsyncMessage:
        consumer = self._consumer
        if consumer.sync.ended:
            raise StopAsyncIteration
        if consumer._listener is None:
            ready = consumer._take_ready()  # a message ready now: no coroutine to await
            if ready is not None:
                return ready
        try:
            consumer._check_receivable()
            message = await consumer._next(self._timeout)  # (receive(), past its own look)
        except IllegalStateException:
            if consumer.sync.ended:  # closed between our check and receive()'s own
                raise StopAsyncIteration from None
            raise
        if message is None:
            raise StopAsyncIteration
        return message


class AsyncQueueBrowser:
    """Looks at a queue's messages without consuming them: ``async for m in browser``.

    The broker's snapshot is read on a thread, :data:`BROWSE_CHUNK` messages a step."""

    BROWSE_CHUNK = 100

    def __init__(self, session: ConsumerOwner, browser: QueueBrowser) -> None:
        self._session = session
        #: the sync core's browser
        self.sync = browser

    @property
    def queue(self) -> Queue:
        return self.sync.queue

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._browse()

    async def _browse(self) -> AsyncIterator[Message]:
        run = self._session._run
        messages = await run(self.sync.get_enumeration)
        while True:
            chunk = await run(_chunk, messages, self.BROWSE_CHUNK)
            if not chunk:
                return
            for message in chunk:
                yield message

    async def close(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> AsyncQueueBrowser:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _chunk(messages: Iterator[Message], n: int) -> list[Message]:
    out: list[Message] = []
    for message in messages:
        out.append(message)
        if len(out) >= n:
            break
    return out
