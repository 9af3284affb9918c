"""Request/reply on the loop: ``reply = await requestor.request(message, timeout=5)``.

One temporary queue and one consumer on it per requestor, made on the first request; the
replier answers to ``JMSReplyTo`` with ``JMSCorrelationID`` set to the request's
``JMSMessageID`` (the JMS convention, what a sync ``QueueRequestor`` peer does). One
reader task routes each reply to the request waiting for it, so many requests can be
outstanding at once; a reply nobody waits for (its request timed out) is acknowledged and
dropped, with a debug log line.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from jmspy.errors import IllegalStateException, JMSException
from jmspy.logs import client_logger

if TYPE_CHECKING:
    from jmspy.destinations import Destination, TemporaryQueue
    from jmspy.message import Message

    from .consumer import AsyncMessageConsumer
    from .message import AsyncMessage
    from .session import AsyncMessageProducer, AsyncSession

__all__ = ["AsyncRequestor"]

log = client_logger("aio")


class AsyncRequestor:
    """Sends requests to ``destination`` and awaits their replies.

    The session should be non-transacted (a transacted request is not sent before
    ``commit()``, so its reply could never come in time); its connection must be started.
    """

    def __init__(self, session: AsyncSession, destination: Destination) -> None:
        if session.transacted:
            raise IllegalStateException(
                "a requestor needs a non-transacted session: a request sent in a "
                "transaction reaches nobody before commit(), so no reply could come")
        self._session = session
        self.destination = destination
        self._ready: asyncio.Task[None] | None = None
        self._reply_queue: TemporaryQueue | None = None
        self._consumer: AsyncMessageConsumer | None = None
        self._producer: AsyncMessageProducer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: dict[str, asyncio.Future[AsyncMessage]] = {}
        self._closed = False

    async def _setup(self) -> None:
        session = self._session
        self._reply_queue = await session.create_temporary_queue()
        self._consumer = await session.create_consumer(self._reply_queue)
        self._producer = await session.create_producer(self.destination)
        self._reader = session.loop.create_task(self._read(), name="jmspy requestor replies")

    async def request(self, message: Message, timeout: float | None = None) -> AsyncMessage:
        """Send ``message`` and return its reply; ``TimeoutError`` when none comes within
        ``timeout`` seconds (None: wait for ever)."""
        if self._closed:
            raise IllegalStateException("the requestor is closed; create a new one")
        if self._ready is None:
            self._ready = self._session.loop.create_task(self._setup())
        await asyncio.shield(self._ready)
        assert self._producer is not None and self._reply_queue is not None
        message.reply_to = self._reply_queue
        sent = self._producer._start(message, None, {})
        key = message.message_id
        assert key is not None  # stamped by the send
        reply: asyncio.Future[AsyncMessage] = self._session.loop.create_future()
        self._waiting[key] = reply
        try:
            await sent
            async with asyncio.timeout(timeout):
                return await reply
        finally:
            self._waiting.pop(key, None)

    async def _read(self) -> None:
        assert self._consumer is not None
        try:
            async for message in self._consumer:
                waiter = self._waiting.get(message.correlation_id or "")
                if waiter is not None and not waiter.done():
                    waiter.set_result(message)
                else:
                    log.debug("reply %s correlates with no waiting request: dropped",
                              message.message_id)
        except JMSException as exc:
            for waiter in self._waiting.values():
                if not waiter.done():
                    waiter.set_exception(exc)

    async def close(self) -> None:
        """Stop reading replies and delete the reply queue."""
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.wait((self._reader,))
        if self._consumer is not None:
            await self._consumer.close()
        if self._reply_queue is not None:
            await self._session._run(self._reply_queue.delete)

    async def __aenter__(self) -> AsyncRequestor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
