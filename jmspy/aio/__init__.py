"""asyncio face of jmspy: ``async with``, ``await`` and ``async for`` over the same core.

>>> from jmspy.aio import AsyncConnectionFactory
>>> async def main() -> None:
...     async with AsyncConnectionFactory("vm://embedded").create_connection() as conn:
...         session = await conn.create_session()
...         queue = session.create_queue("orders")
...         consumer = await session.create_consumer(queue)
...         conn.start()
...         async for message in consumer:
...             async with message.process():
...                 ...

A face, not a second client: flow control, acknowledgement, selectors and reconnecting
are the sync core's, so the buffer behind ``async for`` is the consumer's flow window
(``imqConsumerFlowLimit``), never an unbounded queue, and nothing is dropped. See
docs/asyncio.md. Not imported by ``import jmspy``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy._lazy import facade

if TYPE_CHECKING:
    from .connection import AsyncConnection, AsyncConnectionFactory
    from .consumer import AsyncListener, AsyncMessageConsumer, AsyncQueueBrowser
    from .message import AsyncMessage
    from .requestor import AsyncRequestor
    from .session import AsyncMessageProducer, AsyncSession

_PUBLIC: dict[str, str] = {
    "AsyncConnection": "connection",
    "AsyncConnectionFactory": "connection",
    "AsyncListener": "consumer",
    "AsyncMessage": "message",
    "AsyncMessageConsumer": "consumer",
    "AsyncMessageProducer": "session",
    "AsyncQueueBrowser": "consumer",
    "AsyncRequestor": "requestor",
    "AsyncSession": "session",
}

__all__ = [
    "AsyncConnection",
    "AsyncConnectionFactory",
    "AsyncListener",
    "AsyncMessage",
    "AsyncMessageConsumer",
    "AsyncMessageProducer",
    "AsyncQueueBrowser",
    "AsyncRequestor",
    "AsyncSession",
]

__getattr__, __dir__ = facade(__name__, globals(), _PUBLIC)
