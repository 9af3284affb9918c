"""Async sessions and producers: what may wait for the broker is awaited, and runs on a
thread, one call at a time per session (JMS sessions are single-threaded).

``await producer.send(message)`` sends with the core's completion listener and completes
when the transport reports the outcome (a persistent send over ``stomp://``: the broker's
receipt), so a send never blocks the loop and the sends of one connection stay in order.
Messages are made as in the sync API (``session.create_text_message("hi")``); they are
plain objects and need no await.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from jmspy.acknowledgement import AckMode, AckModes
from jmspy.destinations import Destination, Queue, TemporaryQueue, TemporaryTopic, Topic
from jmspy.message import BytesMessage, MapMessage, Message, TextMessage

from .consumer import AsyncMessageConsumer, AsyncQueueBrowser

if TYPE_CHECKING:
    from jmspy.producer import MessageProducer
    from jmspy.session import Session

    from .loop_reading import LoopReading
    from .owners import SessionOwner

__all__ = ["AsyncMessageProducer", "AsyncSession"]

T = TypeVar("T")


class AsyncSession(AckModes):
    """Creates async producers, consumers and browsers; commits, rolls back, recovers."""

    def __init__(self, connection: SessionOwner, session: Session) -> None:
        self._connection = connection
        #: the sync core's session
        self.sync = session
        self.loop = connection.loop
        self._calls = asyncio.Lock()  # one blocking call at a time, in order
        #: held while one of this session's async listeners runs (one at a time)
        self._dispatch_lock = asyncio.Lock()
        self._consumers: list[AsyncMessageConsumer] = []

    @property
    def ack_mode(self) -> AckMode:
        return self.sync.ack_mode

    @property
    def transacted(self) -> bool:
        return self.sync.transacted

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a thread, after this session's earlier calls. A cancelled
        caller still lets the call finish before the next one starts."""
        async with self._calls:
            future = self.loop.run_in_executor(None, fn, *args)
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                await asyncio.wait((future,))
                raise

    # -- destinations and messages (no I/O: plain calls) -------------------------------
    def create_queue(self, name: str, *, options: Mapping[str, object] | None = None) -> Queue:
        return self.sync.create_queue(name, options=options)

    def create_topic(self, name: str, *, options: Mapping[str, object] | None = None) -> Topic:
        return self.sync.create_topic(name, options=options)

    async def create_temporary_queue(self) -> TemporaryQueue:
        return await self._run(self.sync.create_temporary_queue)

    async def create_temporary_topic(self) -> TemporaryTopic:
        return await self._run(self.sync.create_temporary_topic)

    def create_message(self, properties: Mapping[str, Any] | None = None) -> Message:
        return self.sync.create_message(properties)

    def create_text_message(self, text: str | None = None,
                            properties: Mapping[str, Any] | None = None) -> TextMessage:
        return self.sync.create_text_message(text, properties)

    def create_bytes_message(self, data: bytes | None = None,
                             properties: Mapping[str, Any] | None = None) -> BytesMessage:
        return self.sync.create_bytes_message(data, properties)

    def create_map_message(self, values: Mapping[str, Any] | None = None,
                           properties: Mapping[str, Any] | None = None) -> MapMessage:
        return self.sync.create_map_message(values, properties)

    # -- producers, consumers, browsers ------------------------------------------------
    async def create_producer(self, destination: Destination | None = None, **defaults: Any
                              ) -> AsyncMessageProducer:
        """A producer (``delivery_mode=``, ``priority=``, ``time_to_live=``,
        ``delivery_delay=`` as in the sync API)."""
        producer = await self._run(lambda: self.sync.create_producer(destination, **defaults))
        return AsyncMessageProducer(self, producer)

    async def create_consumer(self, destination: Destination, selector: str | None = None,
                              no_local: bool = False) -> AsyncMessageConsumer:
        """A consumer on a queue, or a non-durable subscription on a topic."""
        return self._wrap(await self._run(self.sync.create_consumer, destination, selector,
                                          no_local))

    async def create_durable_consumer(self, topic: Topic, name: str,
                                      selector: str | None = None, no_local: bool = False
                                      ) -> AsyncMessageConsumer:
        return self._wrap(await self._run(self.sync.create_durable_consumer, topic, name,
                                          selector, no_local))

    async def create_shared_consumer(self, topic: Topic, name: str,
                                     selector: str | None = None) -> AsyncMessageConsumer:
        return self._wrap(await self._run(self.sync.create_shared_consumer, topic, name,
                                          selector))

    async def create_shared_durable_consumer(self, topic: Topic, name: str,
                                             selector: str | None = None
                                             ) -> AsyncMessageConsumer:
        return self._wrap(await self._run(self.sync.create_shared_durable_consumer, topic,
                                          name, selector))

    def _wrap(self, consumer: Any) -> AsyncMessageConsumer:
        wrapped = AsyncMessageConsumer(self, consumer)
        self._consumers.append(wrapped)
        return wrapped

    async def unsubscribe(self, name: str) -> None:
        await self._run(self.sync.unsubscribe, name)

    async def create_browser(self, queue: Queue, selector: str | None = None
                             ) -> AsyncQueueBrowser:
        return AsyncQueueBrowser(self, self.sync.create_browser(queue, selector))

    # -- transactions and acknowledgement ----------------------------------------------
    async def commit(self) -> None:
        """Consume everything received and publish everything sent in this transaction."""
        self._settle_pending()
        await self._run(self.sync.commit)

    async def rollback(self) -> None:
        """Redeliver what was received (marked) and discard what was sent."""
        self._settle_pending()
        await self._run(self.sync.rollback)

    async def recover(self) -> None:
        """Redeliver (marked) every message delivered and not acknowledged: in
        AUTO_ACKNOWLEDGE and DUPS_OK_ACKNOWLEDGE the message handed out and not yet
        settled, in the other modes what the session's ``recover()`` hands back."""
        redelivers = self.ack_mode in (AckMode.AUTO_ACKNOWLEDGE, AckMode.DUPS_OK_ACKNOWLEDGE)
        for consumer in self._consumers:
            message, consumer._pending = consumer._pending, None
            if message is not None and redelivers:
                await self._run(consumer.sync.settle, message, False)
        await self._run(self.sync.recover)

    async def acknowledge(self) -> None:
        """CLIENT_ACKNOWLEDGE: acknowledge every message this session delivered."""
        self._settle_pending()
        self.sync.acknowledge()

    def _settle_pending(self) -> None:
        """A handed-out message counts as processed before the session settles."""
        for consumer in self._consumers:
            consumer._settle_pending()

    # -- closing -----------------------------------------------------------------------
    async def close(self) -> None:
        """Close the session: roll back an open transaction, stop its consumers (every
        ``async for`` on them ends)."""
        for consumer in list(self._consumers):
            await consumer._stop_listening()
        self._settle_pending()
        for consumer in self._consumers:
            consumer._waiter.stop()
        await self._run(self.sync.close)

    @property
    def closed(self) -> bool:
        return self.sync.closed

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncSession {self.sync.ack_mode.name}>"


class AsyncMessageProducer:
    """Sends messages; ``await send()`` completes once the transport reports the
    outcome, raising the send's error if it failed."""

    def __init__(self, session: AsyncSession, producer: MessageProducer) -> None:
        self._session = session
        #: the sync core's producer (its defaults: delivery_mode, priority, ...)
        self.sync = producer

    @property
    def destination(self) -> Destination | None:
        return self.sync.destination

    @property
    def session(self) -> AsyncSession:
        """The session this producer sends in (it makes the messages)."""
        return self._session

    async def send(self, message: Message, destination: Destination | None = None,
                   **options: Any) -> None:
        """Send ``message`` (``delivery_mode=``, ``priority=``, ``time_to_live=``,
        ``delivery_delay=`` as in the sync API). Its JMSMessageID is stamped before the
        first await."""
        handover = self._send(message, destination, options)
        if handover.settled:  # vm:// routed it in the call: nothing to wait for
            if handover.error is not None:
                raise handover.error
            return
        handover.future = future = self._session.loop.create_future()
        await future

    def _start(self, message: Message, destination: Destination | None,
               options: Mapping[str, Any]) -> asyncio.Future[None]:
        """Send now; the future completes with the outcome (the message is stamped when
        this returns)."""
        handover = self._send(message, destination, options)
        future: asyncio.Future[None] = self._session.loop.create_future()
        if handover.settled:
            _complete(future, handover.error)
        else:
            handover.future = future
        return future

    def _send(self, message: Message, destination: Destination | None,
              options: Mapping[str, Any]) -> _Handover:
        """Send now with a hand-over as the completion listener (the message is stamped
        when this returns); settled already if the transport reported in the call."""
        handover = _Handover(self._session.loop, self._session._connection._reading)
        self.sync.send(message, destination, completion_listener=handover, **options)
        return handover

    async def close(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> AsyncMessageProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _Handover:
    """The completion listener of an awaited send: it only hands the outcome to the loop,
    so the core may call it on the transport's own thread (``runs_on_any_thread``)
    rather than hop through its notifier thread first: one thread switch per send. The
    core calls :meth:`outcome` directly (the listener's ``on_completion`` and
    ``on_exception`` are there for any other caller).

    ``future`` is None while the send call is still running on the loop: an outcome
    reported in that call (``vm://`` routes the message in it) is only recorded, and
    ``send()`` returns without making a future at all. A report from another thread
    reaches the loop later, when ``send()`` is awaiting the future it made."""

    __slots__ = ("_loop", "_loop_thread", "_reading", "error", "future", "settled")
    runs_on_any_thread = True

    def __init__(self, loop: asyncio.AbstractEventLoop, reading: LoopReading) -> None:
        self._loop = loop
        self.future: asyncio.Future[None] | None = None  # the sender's, once it awaits
        self._reading = reading
        self._loop_thread = threading.get_ident()  # made on the loop, by send()
        self.settled = False
        self.error: Exception | None = None

    def on_completion(self, message: Message) -> None:
        self.outcome(None)

    def on_exception(self, message: Message, exception: Exception) -> None:
        self.outcome(exception)

    def outcome(self, error: Exception | None) -> None:
        """The send's outcome (any thread): None, or why it failed."""
        if threading.get_ident() == self._loop_thread:  # vm://, or read on the loop
            self._settle(error)
            return
        self._reading.woke()  # a transport's reader may lend the loop its socket
        try:
            self._loop.call_soon_threadsafe(self._settle, error)
        except RuntimeError:  # the loop closed: nobody waits for the outcome
            pass

    def _settle(self, error: Exception | None) -> None:
        # on the loop
        future = self.future
        if future is None:  # still inside send()'s call: it looks at these next
            self.settled = True
            self.error = error
        else:
            _complete(future, error)


def _complete(future: asyncio.Future[None], error: Exception | None) -> None:
    if future.done():  # the sender was cancelled: the send itself went on
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
