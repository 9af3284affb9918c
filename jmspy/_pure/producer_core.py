"""A :class:`~jmspy.producer.MessageProducer`'s fields and its send path (pure twin).

``send()`` is the one method of a producer that runs per message, and in-process
(``vm://``) it was a fifth of what a message cost end to end: a Python call with keyword
arguments, the checks, the stamping of eight headers. ``MessageProducer`` derives from
:class:`ProducerCore` and keeps everything else (its properties, choosing a destination,
closing). The compiled twin (``cython_ext/producer_core.pyx``) runs the same steps in the
same order, and writes the headers straight into the message's C fields (the
``MessageRecord`` twin). ``tests/test_producer_core_twins.py`` holds both to the same
headers, errors and calls. Change one, change the other.

The value checks live here, not in :mod:`jmspy.producer`, because the compiled twin
needs them and is loaded while that module is still being imported.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from jmspy.errors import IllegalStateException, JMSException
from jmspy.message import DeliveryMode, Message

if TYPE_CHECKING:
    from jmspy._pure.lifecycle import ConnectionLife, SessionLife
    from jmspy.completion import CompletionCallback
    from jmspy.destinations import Destination
    from jmspy.owners import ProducerSession

__all__ = [
    "FIELDS",
    "MessageIds",
    "ProducerCore",
    "check_mode",
    "check_priority",
    "check_seconds",
    "now_ms",
]

#: The producer's fields, in the order ``ProducerCore.__init__`` sets them.
FIELDS: Final = (
    "_session",
    "_session_life",
    "_connection_life",
    "destination",
    "_delivery_mode",
    "_priority",
    "_time_to_live",
    "_delivery_delay",
    "_closed",
)


def now_ms() -> int:
    """The wall clock in integer milliseconds since the epoch (what JMSTimestamp holds)."""
    return int(_time() * 1000)


class MessageIds:
    """A connection's JMSMessageIDs: ``prefix`` then 1, 2, 3... (thread-safe: one step
    of the count is atomic). The connection hands its producers the bound ``next_id``."""

    __slots__ = ("_count", "prefix")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._count = itertools.count(1)

    def next_id(self) -> str:
        """The next ID."""
        return f"{self.prefix}{next(self._count)}"


def check_priority(value: int) -> int:
    """``value`` if it is a JMS priority, else JMSException."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 9:
        raise JMSException(f"priority must be an int from 0 to 9, got {value!r}")
    return value


def check_seconds(name: str, value: float) -> float:
    """``value`` as a float if it is a number of seconds >= 0, else JMSException."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise JMSException(f"{name} must be a number of seconds >= 0, got {value!r}")
    return float(value)


def check_mode(value: int) -> DeliveryMode:
    """``value`` as a DeliveryMode if it is one, else JMSException."""
    if isinstance(value, bool) or value not in (1, 2):
        raise JMSException(
            f"delivery_mode must be DeliveryMode.PERSISTENT or DeliveryMode.NON_PERSISTENT, "
            f"got {value!r}"
        )
    return DeliveryMode(value)


class ProducerCore:
    """A producer's session, defaults and state, and ``send()``; see the module."""

    __slots__ = FIELDS

    _session: ProducerSession
    _session_life: SessionLife
    _connection_life: ConnectionLife
    destination: Destination | None
    _delivery_mode: DeliveryMode
    _priority: int
    _time_to_live: float
    _delivery_delay: float
    _closed: bool

    def __init__(self, session: ProducerSession, destination: Destination | None) -> None:
        self._session = session
        # The session's and its connection's state records (jmspy/_pure/lifecycle.py),
        # read by every send: whether both are still open is four flag reads, and the
        # session's _check_open runs only to say which one is not.
        self._session_life = session._life
        self._connection_life = session._connection._life
        self.destination = destination
        self._delivery_mode = DeliveryMode.PERSISTENT
        self._priority = 4
        self._time_to_live = 0.0
        self._delivery_delay = 0.0
        self._closed = False

    def _target(self, destination: Destination | None) -> Destination:
        """Where a send naming ``destination`` goes (the subclass decides)."""
        raise NotImplementedError

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
        life = self._session_life
        connection_life = self._connection_life
        if life.closing or life.closed or connection_life.closing or connection_life.closed:
            session._check_open()  # raises, naming what is closed
        if not isinstance(message, Message):
            raise JMSException(
                f"send() takes a Message, got {type(message).__name__}; wrap data with "
                "session.create_text_message() or create_bytes_message()"
            )
        target = self.destination
        if destination is not None or target is None:
            target = self._target(destination)
        mode = self._delivery_mode if delivery_mode is None else check_mode(delivery_mode)
        prio = self._priority if priority is None else check_priority(priority)
        ttl = self._time_to_live if time_to_live is None else check_seconds(
            "time_to_live", time_to_live
        )
        delay = self._delivery_delay if delivery_delay is None else check_seconds(
            "delivery_delay", delivery_delay
        )
        connection = session._connection
        now = int(_time() * 1000)  # now_ms(), without a call per message
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


#: The wall clock the headers are stamped from (JMSTimestamp is epoch milliseconds).
_time: Callable[[], float] = time.time
