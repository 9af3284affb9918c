"""Message producers: stamp the JMS headers and hand messages to the transport.

Times on the API are seconds (like ``receive(timeout)``); the headers the JMS
specification defines in milliseconds (JMSTimestamp, JMSExpiration, JMSDeliveryTime) are
integer milliseconds since the epoch, as every JMS broker stores them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import api_twins
from .completion import CompletionCallback, CompletionListener
from .destinations import Destination, TemporaryTopic
from .errors import InvalidDestinationException, JMSException

if TYPE_CHECKING:
    from .owners import ProducerSession

__all__ = ["CompletionCallback", "CompletionListener", "MessageProducer"]


if TYPE_CHECKING:
    from ._pure.producer_core import ProducerCore, check_mode, check_priority, check_seconds
else:
    # The fields and send() are a twin (compiled when built): jmspy/_pure/producer_core.py.
    ProducerCore = api_twins.producer_core.ProducerCore
    check_mode = api_twins.producer_core.check_mode
    check_priority = api_twins.producer_core.check_priority
    check_seconds = api_twins.producer_core.check_seconds


class MessageProducer(ProducerCore):
    """Sends messages to one destination, or to any when created without one.

    Its fields and ``send()``, the per-message path, are the :class:`ProducerCore`
    twin's (``jmspy/_pure/producer_core.py``); the rest is here."""

    def __init__(self, session: ProducerSession, destination: Destination | None) -> None:
        if destination is not None and not isinstance(destination, Destination):
            raise InvalidDestinationException(
                f"expected a Queue or Topic, got {destination!r}"
            )
        super().__init__(session, destination)

    # -- defaults -----------------------------------------------------------------------
    @property
    def delivery_mode(self) -> int:
        return self._delivery_mode

    @delivery_mode.setter
    def delivery_mode(self, value: int) -> None:
        self._delivery_mode = check_mode(value)

    @property
    def priority(self) -> int:
        return self._priority

    @priority.setter
    def priority(self, value: int) -> None:
        self._priority = check_priority(value)

    @property
    def time_to_live(self) -> float:
        """Seconds a message stays deliverable; 0 means it never expires."""
        return self._time_to_live

    @time_to_live.setter
    def time_to_live(self, value: float) -> None:
        self._time_to_live = check_seconds("time_to_live", value)

    @property
    def delivery_delay(self) -> float:
        """Seconds the broker holds a message before it can be delivered."""
        return self._delivery_delay

    @delivery_delay.setter
    def delivery_delay(self, value: float) -> None:
        self._delivery_delay = check_seconds("delivery_delay", value)

    # -- sending (send() is the core's) -------------------------------------------------
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
        if isinstance(destination, TemporaryTopic):  # a deleted one is refused
            self._session._connection._check_temporary_topic(destination, consuming=False)
        if destination.options:  # checked (and applied) as create_producer(dest) does
            self._session._declare(destination)
        return destination

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> MessageProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
