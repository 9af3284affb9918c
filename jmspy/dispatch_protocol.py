"""The interface of the listener dispatch twins (``jmspy._cext/_pure.dispatch``).

A session's dispatcher thread hands one consumer at a time to ``drain(session, connection,
consumer)``, which runs that consumer's listener over its buffered messages and coalesces
AUTO_ACKNOWLEDGE acknowledgements. ``drain`` touches only the attributes and methods named
below; the session (``jmspy/session.py``) and its acknowledgement strategy
(``jmspy/acknowledgement.py``) implement them. Tests drive both twins with fakes that
implement exactly this surface.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sized
from typing import Any, Protocol

from .prefetch_protocol import PrefetchBufferProtocol

__all__ = ["DrainConnection", "DrainConnectionLife", "DrainConsumer", "DrainFlow",
           "DrainFunction", "DrainSession", "DrainSessionLife"]


class DrainFlow(Protocol):
    @property
    def enabled(self) -> bool: ...


class DrainConnectionLife(Protocol):
    """The connection's state record (``jmspy._pure/_cext.lifecycle``)."""

    started: bool


class DrainSessionLife(Protocol):
    """The session's state record (``jmspy._pure/_cext.lifecycle``)."""

    closing: bool
    closed: bool


class DrainConnection(Protocol):
    """What drain reads from the connection: whether delivery is started (its state
    record, a ``ConnectionLife`` of the same twin build as drain), the cap."""

    @property
    def _life(self) -> DrainConnectionLife: ...

    @property
    def _flow(self) -> DrainFlow: ...


class DrainConsumer(Protocol):
    """The consumer whose buffered messages are dispatched (its lock guards the rest)."""

    _lock: threading.Lock
    _buffer: PrefetchBufferProtocol
    _closed: bool
    _listener: Any


class DrainAck(Protocol):
    """The session's acknowledgement strategy, as drain uses it."""

    #: How many acknowledgements drain may queue before flushing (0: never queue).
    batch: int
    #: What a delivered message's ``acknowledge()`` runs (set on coalesced messages).
    acknowledger: Callable[[Any], None]
    #: Set by ``recover()`` inside a listener: drain treats the message as failed.
    recover_requested: bool

    #: Queue a ``(consumer, delivery tag)`` acknowledgement (sent by ``_flush_acks``).
    hold: Callable[[tuple[Any, int]], None]
    #: How many are queued now, declined ones from an earlier drain included.
    held_count: Callable[[], int]

    def delivered(self, consumer: Any, message: Any) -> None: ...


class DrainSession(Protocol):
    """The session side: state flags plus the slow paths drain calls out to."""

    @property
    def acknowledgement(self) -> DrainAck: ...

    @property
    def _life(self) -> DrainSessionLife:
        """Closing, closed (a ``SessionLife`` of the same twin build as drain)."""

    @property
    def _ready(self) -> Sized:
        """Other consumers waiting for the dispatcher (fairness)."""

    @property
    def _deferred(self) -> list[Any]:
        """Closes requested from inside a listener (a list, replaced only between
        drains)."""

    _current: Any

    def _listener_done(self, consumer: Any, message: Any, ok: bool) -> None: ...

    def _listener_failed(self, listener: Any, message: Any, exc: Exception) -> None: ...

    def _flush_acks(self) -> None: ...

    def _offer_acks(self) -> None:
        """Send the queued acknowledgements unless the transport is busy (they stay
        queued then)."""


class DrainFunction(Protocol):
    def __call__(
        self,
        session: DrainSession,
        connection: DrainConnection,
        consumer: DrainConsumer,
    ) -> int: ...
