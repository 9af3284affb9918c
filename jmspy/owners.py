"""What a consumer and a producer need of the session that made them, and of its
connection.

Protocols, below the classes that satisfy them (:class:`~jmspy.session.Session`,
:class:`~jmspy.connection.Connection`): a session makes consumers and producers and a
connection makes sessions, so a consumer or producer that named its owner's class would
import its own maker. Each member here is one the consumer's or producer's code calls;
the type checker holds the owners to them where a session hands itself over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from ._pure.lifecycle import ConnectionLife, SessionLife
    from .completion import CompletionCallback
    from .destinations import Destination, TemporaryTopic
    from .errors import JMSException
    from .flow import ConnectionFlow
    from .message import Message
    from .transport import Transport

__all__ = ["ConsumerSession", "OwnerConnection", "ProducerSession"]

#: the consumer class a session takes back in its calls (MessageConsumer)
_C = TypeVar("_C", contravariant=True)


class OwnerConnection(Protocol):
    """The connection of a consumer's or producer's session."""

    @property
    def drops(self) -> int: ...
    @property
    def started(self) -> bool: ...
    @property
    def _lost(self) -> JMSException | None: ...
    @property
    def _flow(self) -> ConnectionFlow: ...
    @property
    def _life(self) -> ConnectionLife: ...
    @property
    def _next_message_id(self) -> Callable[[], str]: ...

    def _check_temporary_topic(self, topic: TemporaryTopic, *, consuming: bool) -> None: ...

    def _send_async(self, session: object, message: Message, tx: str | None,
                    listener: CompletionCallback) -> None: ...


class _Transacted(Protocol):
    @property
    def tx(self) -> str | None: ...


class ConsumerSession(Protocol[_C]):
    """What a consumer calls on its session; ``_C`` is the consumer class."""

    @property
    def _connection(self) -> OwnerConnection: ...
    @property
    def _transport(self) -> Transport: ...

    def _check_open(self) -> None: ...
    def _ending(self) -> bool: ...
    def _ensure_dispatcher(self) -> None: ...
    def _schedule(self, consumer: _C) -> None: ...
    def _close_consumer(self, consumer: _C) -> None: ...
    def _delivered_to_app(self, consumer: _C, message: Message) -> None: ...
    def _processing_done(self, consumer: _C, message: Message, ok: bool) -> None: ...


class ProducerSession(Protocol):
    """What a producer calls on its session."""

    @property
    def _connection(self) -> OwnerConnection: ...
    @property
    def _transport(self) -> Transport: ...
    @property
    def _life(self) -> SessionLife: ...
    @property
    def acknowledgement(self) -> _Transacted: ...

    def _check_open(self) -> None: ...
    def _declare(self, destination: Destination) -> None: ...
