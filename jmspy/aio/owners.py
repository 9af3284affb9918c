"""What each async object needs of the one that made it, as Protocols.

The face's objects point up at their owners (a consumer at its session, a session at its
connection, a message at its consumer); naming the owners' classes, even only for the type
checker, would knot the face's modules into one import cycle, as the client core's once
were (``jmspy/owners.py`` cuts those the same way). The type checker holds each owner to
its Protocol where it hands itself over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from jmspy.acknowledgement import AckMode
    from jmspy.errors import JMSException
    from jmspy.message import Message

    from .loop_reading import LoopReading

__all__ = ["ConsumerOwner", "MessageOwner", "SessionOwner"]

T = TypeVar("T")


class SessionOwner(Protocol):
    """An :class:`~jmspy.aio.AsyncConnection`, as its sessions and consumers use it."""

    loop: asyncio.AbstractEventLoop
    _reading: LoopReading

    def _report(self, error: JMSException) -> None: ...

    def _listener_failed(self, listener: object, message: Message, exc: Exception,
                         redelivered: bool) -> None: ...


class ConsumerOwner(Protocol):
    """An :class:`~jmspy.aio.AsyncSession`, as its consumers and browsers use it."""

    loop: asyncio.AbstractEventLoop
    _connection: SessionOwner
    _dispatch_lock: asyncio.Lock

    @property
    def ack_mode(self) -> AckMode: ...

    async def _run(self, fn: Callable[..., T], *args: Any) -> T: ...

    async def recover(self) -> None: ...

    async def rollback(self) -> None: ...


class MessageOwner(Protocol):
    """An :class:`~jmspy.aio.AsyncMessageConsumer`, as the messages it hands out use it."""

    def _settle_if_pending(self, message: Message) -> None: ...

    async def _succeeded(self, message: Message) -> None: ...

    async def _failed(self, message: Message) -> None: ...
