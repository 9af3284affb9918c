"""Async connection factories and connections: ``async with
AsyncConnectionFactory(url).create_connection() as conn``.

The same URLs, address lists and Open MQ properties as
:class:`~jmspy.factory.ConnectionFactory`, because the connection under the face is the
sync core's: connecting, reconnecting, flow control and acknowledgement are its. Opening
and closing wait for the broker, so they run on a thread; ``start()`` and ``stop()`` only
set a flag and wake waiters, so they are plain calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from jmspy.errors import JMSException
from jmspy.factory import ConnectionFactory
from jmspy.logs import client_logger

from .loop_reading import LoopReading
from .session import AsyncSession

if TYPE_CHECKING:
    from jmspy.connection import Connection, ExceptionCallback
    from jmspy.message import Message

__all__ = ["AsyncConnection", "AsyncConnectionFactory"]

log = client_logger("aio")


class AsyncConnectionFactory:
    """Creates async connections: ``AsyncConnectionFactory(url, **properties)`` takes
    what :class:`~jmspy.factory.ConnectionFactory` takes (and checks it the same way).

    >>> factory = AsyncConnectionFactory("vm://embedded", imqConsumerFlowLimit=100)
    """

    def __init__(self, url: str | None = None, **properties: Any) -> None:
        #: the sync factory whose connections this one wraps
        self.sync = ConnectionFactory(url, **properties)

    @property
    def url(self) -> str:
        return self.sync.url

    def __getitem__(self, name: str) -> Any:
        return self.sync[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self.sync[name] = value

    def create_connection(self, user: str | None = None, password: str | None = None, *,
                          client_id: str | None = None) -> _Opening:
        """``conn = await factory.create_connection()`` or ``async with
        factory.create_connection() as conn:`` (closed at the block's end). The
        connection is stopped, as in JMS: ``conn.start()`` to receive."""
        return _Opening(self.sync, user, password, client_id)

    def __repr__(self) -> str:
        return f"AsyncConnectionFactory({self.sync.url!r})"


class _Opening:
    """An opening connection: awaitable, and an async context manager that closes it."""

    __slots__ = ("_args", "_connection", "_factory")

    def __init__(self, factory: ConnectionFactory, user: str | None, password: str | None,
                 client_id: str | None) -> None:
        self._factory = factory
        self._args = (user, password, client_id)
        self._connection: AsyncConnection | None = None

    async def _open(self) -> AsyncConnection:
        loop = asyncio.get_running_loop()
        user, password, client_id = self._args
        sync = await loop.run_in_executor(
            None, lambda: self._factory.create_connection(user, password, client_id=client_id))
        return AsyncConnection(sync, loop)

    def __await__(self) -> Generator[Any, None, AsyncConnection]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncConnection:
        self._connection = await self._open()
        return self._connection

    async def __aexit__(self, *exc: object) -> None:
        if self._connection is not None:
            await self._connection.close()


class AsyncConnection:
    """A live connection on one event loop; create sessions from it, then ``start()``."""

    def __init__(self, connection: Connection, loop: asyncio.AbstractEventLoop) -> None:
        #: the sync core's connection
        self.sync = connection
        #: the loop this connection's futures and listeners belong to
        self.loop = loop
        self._sessions: list[AsyncSession] = []
        #: the socket reading a stomp:// transport may lend this loop (.loop_reading)
        self._reading = LoopReading(loop)

    async def create_session(self, transacted: bool = False, ack_mode: int = 1
                             ) -> AsyncSession:
        """A session; ``ack_mode`` is an ``AsyncSession.*_ACKNOWLEDGE`` constant (the
        same values as ``Session``'s)."""
        session = await self.loop.run_in_executor(
            None, self.sync.create_session, transacted, ack_mode)
        wrapped = AsyncSession(self, session)
        self._sessions.append(wrapped)
        return wrapped

    def start(self) -> None:
        """Start (or resume) delivery to ``receive()``, ``async for`` and listeners."""
        self.sync.start()

    def stop(self) -> None:
        """Pause delivery; messages stay buffered (flow limits still bound them)."""
        self.sync.stop()

    @property
    def started(self) -> bool:
        return self.sync.started

    @property
    def closed(self) -> bool:
        return self.sync.closed

    @property
    def where(self) -> str:
        return self.sync.where

    @property
    def client_id(self) -> str | None:
        return self.sync.client_id

    def flow_stats(self) -> dict[str, Any]:
        return self.sync.flow_stats()

    def set_exception_listener(self, listener: ExceptionCallback | None) -> None:
        """Hear about asynchronous problems: a connection that dropped or was lost (on a
        jmspy thread, as in the sync API) and an async listener that raised (on the
        loop)."""
        self.sync.set_exception_listener(listener)

    @property
    def exception_listener(self) -> ExceptionCallback | None:
        return self.sync.exception_listener

    async def close(self) -> None:
        """Close sessions (rolling back open transactions) and the transport. Every
        ``async for`` and ``receive()`` on the connection ends, from any task."""
        for session in list(self._sessions):
            for consumer in list(session._consumers):
                await consumer._stop_listening()
            if not session.closed:
                session._settle_pending()
        self._reading.close()
        await self.loop.run_in_executor(None, self.sync.close)
        for session in self._sessions:
            for consumer in session._consumers:
                consumer._waiter.stop()

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncConnection to {self.sync.where}>"

    # -- reporting (the async listeners') ----------------------------------------------
    def _report(self, error: JMSException) -> None:
        listener = self.sync.exception_listener
        if listener is None:
            log.warning("%s", error)
            return
        try:
            on_exception = getattr(listener, "on_exception", None)
            if on_exception is not None:
                on_exception(error)
            else:
                listener(error)  # type: ignore[operator]
        except Exception:
            log.exception("the exception listener raised")

    def _listener_failed(self, listener: object, message: Message, exc: Exception,
                         redelivered: bool) -> None:
        error = JMSException(
            f"message listener {listener!r} raised {type(exc).__name__}: {exc} while "
            f"handling {message.message_id}"
            + ("; the message will be redelivered" if redelivered else ""),
            error_code="LISTENER_FAILED")
        error.__cause__ = exc
        self._report(error)
