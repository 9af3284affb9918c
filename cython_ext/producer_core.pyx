# cython: language_level=3, auto_pickle=False
"""A MessageProducer's fields and its send path (compiled twin).

The pure twin ``jmspy/_pure/producer_core.py`` says what this is and why it is a twin;
``tests/test_producer_core_twins.py`` holds both to the same headers, errors and calls.
Change one, change the other.

What compiling buys, once per message sent: the keyword arguments are parsed in C, the
producer's defaults are C fields, and the eight headers are written straight into the
message's fields (``MessageRecord``, ``jmspy/_cext/message_record.pxd``) instead of by a
Python attribute store each; whether the session and its connection are open is four C
flags of their state records (``jmspy/_cext/lifecycle.pxd``). What ``send()`` calls on
the session, the connection and the transport is theirs, and stays a Python call.
"""

from libc.stdint cimport int64_t
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from jmspy._cext.lifecycle cimport ConnectionLife, SessionLife
from jmspy._cext.message_record cimport MessageRecord

from jmspy._pure.producer_core import FIELDS, check_mode, check_priority, check_seconds
from jmspy.errors import IllegalStateException, JMSException
from jmspy.message import DeliveryMode, Message

__all__ = [
    "FIELDS",
    "MessageIds",
    "ProducerCore",
    "check_mode",
    "check_priority",
    "check_seconds",
    "now_ms",
]

cdef object _PERSISTENT = DeliveryMode.PERSISTENT
cdef object _ZERO_SECONDS = 0.0


cdef inline int64_t _now_ms() except? -1:
    """The clock ``time.time()`` reads (CLOCK_REALTIME), in ms, without a Python call."""
    cdef timespec ts
    if clock_gettime(CLOCK_REALTIME, &ts) != 0:
        raise OSError("clock_gettime(CLOCK_REALTIME) failed")
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


def now_ms():
    """The wall clock in integer milliseconds since the epoch (what JMSTimestamp holds)."""
    return _now_ms()


cdef class MessageIds:
    """A connection's JMSMessageIDs; see the pure twin. A C count under the GIL."""

    cdef readonly str prefix
    cdef int64_t _count

    def __init__(self, str prefix):
        self.prefix = prefix
        self._count = 0

    def next_id(self):
        """The next ID."""
        self._count += 1
        return f"{self.prefix}{self._count}"


cdef class ProducerCore:
    """A producer's session, defaults and state, and ``send()``; see the pure twin."""

    cdef public object _session
    cdef SessionLife _session_life
    cdef ConnectionLife _connection_life
    cdef public object destination
    cdef public object _delivery_mode
    cdef public object _priority
    cdef public object _time_to_live
    cdef public object _delivery_delay
    cdef public object _closed

    def __init__(self, session, destination):
        self._session = session
        self._session_life = session._life  # see the pure twin
        self._connection_life = session._connection._life
        self.destination = destination
        self._delivery_mode = _PERSISTENT
        self._priority = 4
        self._time_to_live = _ZERO_SECONDS
        self._delivery_delay = _ZERO_SECONDS
        self._closed = False

    def send(self, message, destination=None, *, delivery_mode=None, priority=None,
             time_to_live=None, delivery_delay=None, completion_listener=None):
        """Send ``message``; with ``completion_listener`` the call returns at once and
        the listener hears the outcome later on a jmspy thread."""
        if self._closed:
            raise IllegalStateException("the producer is closed; create a new one")
        session = self._session
        cdef SessionLife life = self._session_life
        cdef ConnectionLife connection_life = self._connection_life
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
        now = _now_ms()
        cdef MessageRecord record = <MessageRecord>message  # a Message: checked above
        record.message_id = connection._next_message_id()
        record.timestamp = now
        record.destination = target
        record.delivery_mode = mode
        record.priority = prio
        record.expiration = now + int(ttl * 1000) if ttl > 0 else 0
        record.delivery_time = now + int(delay * 1000) if delay > 0 else now
        tx = session.acknowledgement.tx
        if completion_listener is not None:
            connection._send_async(session, message, tx, completion_listener)
        else:
            session._transport.send(message, tx)
