# cython: language_level=3, auto_pickle=False
"""A STOMP session's common SEND, taken in one call (compiled twin).

The pure twin ``jmspy/broker_ref/protocols/stomp/send_path.py`` says which SENDs are
common and why this path exists; ``tests/stomp_server/test_send_common.py`` holds both
twins to the session's full path, the reference. Change one, change the other.

What compiling buys, once per SEND, on the stretch between reading it and writing its
RECEIPT that a waiting producer waits for: the session's fields are C fields, the header
checks and the property dict are C loops, the broker message is built by a direct
``tp_new`` and field stores into the compiled record, and the common send to an existing
queue with room is a C call into the compiled ``queue_run.route_fast``. Anything else is
the broker connection's ``send``, a Python call (it asks ``route_fast`` again first,
which declines in a few field reads).
"""

from jmspy._cext.queue_run cimport route_fast
from jmspy._cext.records cimport ConnectionRecord, ServerMessage

from jmspy import twins
from jmspy.broker_ref.core import BodyType
from jmspy.broker_ref.protocols.stomp.held import HeldSend
from jmspy.broker_ref.protocols.stomp.mapping import _RESERVED, STATS_DESTINATION
from jmspy.broker_ref.protocols.stomp.send_path import SLOW_HEADERS
from jmspy.stomp_frames import Frame

__all__ = ["SLOW_HEADERS", "SessionRecord"]

cdef frozenset _slow = SLOW_HEADERS
cdef frozenset _reserved = _RESERVED
cdef str _stats = STATS_DESTINATION
cdef object _BYTES = BodyType.BYTES
cdef object _TEXT = BodyType.TEXT
cdef object _HeldSend = HeldSend
cdef object _Frame = Frame
cdef object _encode_frame = twins.stomp_codec.encode_frame


cdef class SessionRecord:
    """The fields of a STOMP session that its common SEND reads; see the pure twin."""

    cdef public object broker
    cdef public object version
    cdef public object closing
    cdef public object _out
    cdef public object _conn
    cdef public object _destinations
    cdef public object _held
    cdef public object _id_prefix
    cdef public object _msg_seq

    def send_common(self, frame, dict headers, receipt):
        """See the pure twin."""
        cdef object conn = self._conn
        cdef object name
        cdef object value
        cdef bytes body
        cdef dict props
        cdef ServerMessage message
        if conn is None:
            return False
        props = {}  # the application properties, in one pass
        for name, value in headers.items():
            if name in _slow:
                return False
            if name not in _reserved:
                props[name] = value
        dest = headers.get("destination")
        if dest is None or dest == _stats:
            return False
        target = self._destinations.cached(dest)
        if target is None:
            return False
        body = frame.body
        if "content-length" in headers:
            body_type, payload = _BYTES, body
        else:
            try:
                payload = body.decode("utf-8")
            except UnicodeDecodeError:
                return False
            body_type = _TEXT
        message = ServerMessage.__new__(ServerMessage)  # a direct tp_new call
        message.message_id = self._id_prefix + str(next(self._msg_seq))
        message.kind = target.kind
        message.destination = target.name
        message.body_type = body_type
        message.body = payload
        message.properties = props
        message.persistent = False
        message.priority = 4
        message.timestamp = self.broker.now()
        message.expiration = 0
        message.deliver_at = 0
        message.correlation_id = None
        message.reply_to = None
        message.jms_type = None
        message.producer_connection = 0
        message.size = len(body) + 64
        if not route_fast(<ConnectionRecord>conn, message):
            ticket = _HeldSend(receipt, len(body))
            if not conn.send(message, None, ticket=ticket, timeout_ms=0):
                held = self._held
                held.parked(ticket)
                held.take_withheld()
                return True
        if receipt is not None and not self.closing:
            self._out.append(_encode_frame(_Frame("RECEIPT", [("receipt-id", receipt)]),
                                           self.version))
        return True
