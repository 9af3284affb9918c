"""Message producers: stamp the JMS headers and hand messages to the transport.

Times on the API are seconds (like ``receive(timeout)``); the headers the JMS
specification defines in milliseconds (JMSTimestamp, JMSExpiration, JMSDeliveryTime) are
integer milliseconds since the epoch, as every JMS broker stores them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .destinations import Destination
from .errors import IllegalStateException, InvalidDestinationException, JMSException
from .message import DeliveryMode, Message

if TYPE_CHECKING:
    from .session import Session

__all__ = ["CompletionListener", "MessageProducer"]


@runtime_checkable
class CompletionListener(Protocol):
    """JMS 2.0 asynchronous send callback (called on a jmspy thread, never the sender's)."""

    def on_completion(self, message: Message) -> None: ...

    def on_exception(self, message: Message, exception: Exception) -> None: ...


#: A CompletionListener, or a callable ``f(message, exception_or_None)``.
CompletionCallback = CompletionListener | Callable[[Message, Exception | None], Any]

def _check_priority(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 9:
        raise JMSException(f"priority must be an int from 0 to 9, got {value!r}")
    return value


def _check_seconds(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise JMSException(f"{name} must be a number of seconds >= 0, got {value!r}")
    return float(value)


def _check_mode(value: int) -> DeliveryMode:
    if isinstance(value, bool) or value not in (1, 2):
        raise JMSException(
            f"delivery_mode must be DeliveryMode.PERSISTENT or DeliveryMode.NON_PERSISTENT, "
            f"got {value!r}"
        )
    return DeliveryMode(value)


class MessageProducer:
    """Sends messages to one destination, or to any when created without one."""

    def __init__(self, session: Session, destination: Destination | None) -> None:
        if destination is not None and not isinstance(destination, Destination):
            raise InvalidDestinationException(
                f"expected a Queue or Topic, got {destination!r}"
            )
        self._session = session
        self.destination = destination
        self._delivery_mode = DeliveryMode.PERSISTENT
        self._priority = 4
        self._time_to_live = 0.0
        self._delivery_delay = 0.0
        self._closed = False

    # -- defaults -----------------------------------------------------------------------
    @property
    def delivery_mode(self) -> int:
        return self._delivery_mode

    @delivery_mode.setter
    def delivery_mode(self, value: int) -> None:
        self._delivery_mode = _check_mode(value)

    @property
    def priority(self) -> int:
        return self._priority

    @priority.setter
    def priority(self, value: int) -> None:
        self._priority = _check_priority(value)

    @property
    def time_to_live(self) -> float:
        """Seconds a message stays deliverable; 0 means it never expires."""
        return self._time_to_live

    @time_to_live.setter
    def time_to_live(self, value: float) -> None:
        self._time_to_live = _check_seconds("time_to_live", value)

    @property
    def delivery_delay(self) -> float:
        """Seconds the broker holds a message before it can be delivered."""
        return self._delivery_delay

    @delivery_delay.setter
    def delivery_delay(self, value: float) -> None:
        self._delivery_delay = _check_seconds("delivery_delay", value)

    # -- sending --------------------------------------------------------------------------
    def send(
        self,
        message: Message,
        destination: Destination | None = None,
        *,
        delivery_mode: int | None = None,
        priority: int | None = None,
        time_to_live: float | None = None,
        delivery_delay: float | None = None,
        completion_listener: CompletionCallback | None = None,
    ) -> None:
        """Send ``message``; with ``completion_listener`` the call returns at once and
        the listener hears the outcome later on a jmspy thread."""
        if self._closed:
            raise IllegalStateException("the producer is closed; create a new one")
        session = self._session
        session._check_open()
        if not isinstance(message, Message):
            raise JMSException(
                f"send() takes a Message, got {type(message).__name__}; wrap data with "
                "session.create_text_message() or create_bytes_message()"
            )
        target = self.destination
        if destination is not None or target is None:
            target = self._target(destination)
        mode = self._delivery_mode if delivery_mode is None else _check_mode(delivery_mode)
        prio = self._priority if priority is None else _check_priority(priority)
        ttl = self._time_to_live if time_to_live is None else _check_seconds(
            "time_to_live", time_to_live
        )
        delay = self._delivery_delay if delivery_delay is None else _check_seconds(
            "delivery_delay", delivery_delay
        )
        connection = session._connection
        now = int(time.time() * 1000)
        message.message_id = connection._next_message_id()
        message.timestamp = now
        message.destination = target
        message.delivery_mode = mode
        message.priority = prio
        message.expiration = now + int(ttl * 1000) if ttl > 0 else 0
        message.delivery_time = now + int(delay * 1000) if delay > 0 else now
        tx = session.acknowledgement.tx
        if completion_listener is not None:
            connection._send_async(session, message, tx, completion_listener)
        else:
            session._transport.send(message, tx)

    def _target(self, destination: Destination | None) -> Destination:
        """Where a send with ``destination`` goes (or why it cannot)."""
        if self.destination is not None:
            if destination is not None and destination != self.destination:
                raise JMSException(
                    f"this producer sends to {self.destination}; it cannot also send to "
                    f"{destination}. Create a producer with no destination to choose per send"
                )
            return self.destination
        if destination is None:
            raise InvalidDestinationException(
                "this producer has no destination: pass one to send(message, destination)"
            )
        if not isinstance(destination, Destination):
            raise InvalidDestinationException(f"expected a Queue or Topic, got {destination!r}")
        return destination

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> MessageProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
