"""A received message as the asyncio face hands it out: the sync core's
:class:`~jmspy.message.Message` plus what must be awaited (``acknowledge()``) and
``async with message.process():``.

A wrapper rather than a subclass: the transports build the core's message records (a
compiled twin when built), and the per-message path must not pay for the face. Every
attribute the wrapper does not define reads through to :attr:`AsyncMessage.message`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from jmspy.message import Message
from jmspy.property_value import PropertyValue

if TYPE_CHECKING:
    from jmspy.destinations import Destination

    from .owners import MessageOwner

__all__ = ["AsyncMessage"]


class AsyncMessage:
    """A message received by an :class:`~jmspy.aio.AsyncMessageConsumer`.

    The JMS headers and the body read as on :class:`~jmspy.message.Message` (any other
    attribute reads through to :attr:`message`); ``acknowledge()`` is awaited, and
    :meth:`process` settles the message by the outcome of a block."""

    __slots__ = ("_consumer", "message")

    def __init__(self, message: Message, consumer: MessageOwner) -> None:
        #: the core's message (its ``acknowledge()`` is the blocking one)
        self.message = message
        self._consumer = consumer

    # -- the headers and the body, typed -----------------------------------------------
    @property
    def message_id(self) -> str | None:
        return self.message.message_id

    @property
    def correlation_id(self) -> str | None:
        return self.message.correlation_id

    @property
    def reply_to(self) -> Destination | None:
        return self.message.reply_to

    @property
    def destination(self) -> Destination | None:
        return self.message.destination

    @property
    def redelivered(self) -> bool:
        """JMSRedelivered: the broker delivered this message before (to anyone)."""
        return self.message.redelivered

    @property
    def delivery_count(self) -> int:
        return self.message.delivery_count

    @property
    def priority(self) -> int:
        return self.message.priority

    @property
    def timestamp(self) -> int:
        return self.message.timestamp

    @property
    def properties(self) -> Mapping[str, PropertyValue]:
        return self.message.properties

    @property
    def text(self) -> str | None:
        """A TextMessage's text (None for a message of another type)."""
        text = getattr(self.message, "text", None)
        return text if isinstance(text, str) else None

    def get_property(self, name: str) -> PropertyValue:
        return self.message.properties.get(name)

    def __getattr__(self, name: str) -> Any:
        # only reached for names the wrapper does not define
        return getattr(self.message, name)

    # -- settling ----------------------------------------------------------------------
    async def acknowledge(self) -> None:
        """Acknowledge per the session's mode (CLIENT_ACKNOWLEDGE: everything the
        session delivered so far; INDIVIDUAL_ACKNOWLEDGE: this message; other modes:
        nothing to do). An acknowledgement is a frame written, not a round trip, so it
        runs on the loop as one bounded step."""
        self._consumer._settle_if_pending(self.message)
        self.message.acknowledge()

    @asynccontextmanager
    async def process(self) -> AsyncIterator[AsyncMessage]:
        """Settle this message by how the block ends (aio-pika's ``message.process()``).

        On success: AUTO_ACKNOWLEDGE and DUPS_OK_ACKNOWLEDGE acknowledge it now (not when
        the next message is asked for), CLIENT_ACKNOWLEDGE and INDIVIDUAL_ACKNOWLEDGE
        call ``acknowledge()``, a transacted session leaves it to ``commit()``. On an
        exception, cancellation included, it is redelivered (marked JMSRedelivered) as
        the mode says: AUTO and DUPS_OK deliver it again, CLIENT and INDIVIDUAL
        ``recover()``, a transacted session rolls back. The exception propagates."""
        try:
            yield self
        except BaseException:
            await self._consumer._failed(self.message)
            raise
        await self._consumer._succeeded(self.message)

    def __repr__(self) -> str:
        return f"<AsyncMessage {self.message!r}>"
