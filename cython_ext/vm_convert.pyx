# cython: language_level=3
"""``vm://`` message mapping: client Message <-> broker ServerMessage (compiled twin).

The pure twin ``jmspy/transports/vm_convert.py`` (beside the vm transport) documents the
semantics; ``tests/test_vm_convert_twins.py`` converts the same random messages with both
and requires identical results. Change one, change the other.

What compiling buys, once per message sent or delivered: both records are typed C structs
(the client's ``MessageRecord`` in ``jmspy/_cext/message_record.pxd``, the broker's
``ServerMessage`` in ``jmspy/_cext/records.pxd``), so their fields are read and written
directly where the pure twin pays a generic attribute lookup per field, and a run of
deliveries is converted in one C loop. It runs on the compiled records only (the pure
twins' messages are not these C types).
"""

from cpython.object cimport PyObject, PyTypeObject

from jmspy._cext.members cimport check_members, member_indices
from jmspy._cext.message_record cimport MessageRecord
from jmspy._cext.records cimport ServerMessage

from jmspy.broker_ref.core.kinds import BodyType, DestinationKind
from jmspy.destinations import Queue, TemporaryQueue, Topic
from jmspy._pure.message_record import FIELDS
from jmspy.message import BytesMessage, MapMessage, Message, TextMessage

__all__ = [
    "DeliverMany",
    "dest_key",
    "to_client_message",
    "to_client_messages",
    "to_destination",
    "to_server_message",
]


cdef dict _queues = {}
cdef dict _topics = {}
cdef Py_ssize_t _MAX_CACHED_DESTINATIONS = 4096
cdef object _TEXT = BodyType.TEXT
cdef object _BYTES = BodyType.BYTES
cdef object _MAP = BodyType.MAP
cdef object _MESSAGE = BodyType.MESSAGE
cdef object _QUEUE = DestinationKind.QUEUE
cdef object _TOPIC = DestinationKind.TOPIC
cdef object _Text = TextMessage
cdef object _Bytes = BytesMessage
cdef object _Map = MapMessage
cdef object _Message = Message
cdef tuple _NO_ARGS = ()
cdef tuple _FIELDS = FIELDS
# The fields to_server_message reads (the pure twin reads these and no others).
cdef tuple _SENT = member_indices(FIELDS, (
    "destination", "message_id", "_body", "reply_to", "timestamp", "delivery_time",
    "_properties", "delivery_mode", "priority", "expiration", "correlation_id", "jms_type"))


cdef inline object _blank(object cls):
    """``cls.__new__(cls)`` through the type's C slot (the record's allocator, which sets
    every field to None): as a Python call (a method lookup on the class, then the call)
    it cost about 800 instructions per message."""
    return (<PyTypeObject*>cls).tp_new(<type>cls, <PyObject*>_NO_ARGS, NULL)


cpdef tuple dest_key(object destination):
    """The broker's (kind, name) for a client destination."""
    return (_TOPIC if isinstance(destination, Topic) else _QUEUE, destination.name)


cpdef object to_destination(object kind, str name):
    """The shared client destination for a broker (kind, name)."""
    cdef dict cache = _topics if kind is _TOPIC else _queues
    dest = cache.get(name)
    if dest is None:
        if kind is _TOPIC:
            dest = Topic(name)
        elif name.startswith("temp-queue://"):
            dest = TemporaryQueue(name)
        else:
            dest = Queue(name)
        if len(cache) >= _MAX_CACHED_DESTINATIONS:
            cache.clear()  # many temporary queues: start over, never grow unbounded
        cache[name] = dest
    return dest


cpdef object to_server_message(object message, object connection_id):
    """Copy what the broker needs; the sender may reuse its Message after send()."""
    cdef MessageRecord m = message
    check_members(m, _FIELDS, _SENT)  # the application's message: a deleted field is an error
    assert m.destination is not None and m.message_id is not None
    cdef object body = m._body
    if isinstance(message, _Text):
        body_type = _TEXT
        size = len(body) if body else 0
    elif isinstance(message, _Bytes):
        body_type = _BYTES
        size = len(body)
    elif isinstance(message, _Map):
        body_type, body = _MAP, dict(body)
        size = message.body_size()
    else:
        body_type, body, size = _MESSAGE, None, 0
    reply = m.reply_to
    timestamp = m.timestamp
    delivery_time = m.delivery_time
    # Every field is set here; the generated __init__ would parse sixteen keywords.
    cdef ServerMessage sm = ServerMessage.__new__(ServerMessage)  # a direct tp_new call
    sm.message_id = m.message_id
    sm.kind, sm.destination = dest_key(m.destination)
    sm.body_type = body_type
    sm.body = body
    sm.properties = dict(m._properties)
    sm.persistent = m.delivery_mode == 2
    sm.priority = m.priority
    sm.timestamp = timestamp
    sm.expiration = m.expiration
    sm.deliver_at = delivery_time if delivery_time > timestamp else 0
    sm.correlation_id = m.correlation_id
    sm.reply_to = dest_key(reply) if reply is not None else None
    sm.jms_type = m.jms_type
    sm.producer_connection = connection_id
    sm.size = size + 64
    return sm


cdef object _convert(ServerMessage sm, object delivery_tag, object count):
    cdef object body_type = sm.body_type
    cdef object msg
    if body_type is _TEXT:
        msg = _blank(_Text)
    elif body_type is _BYTES:
        msg = _blank(_Bytes)
        msg._pos = 0
    elif body_type is _MAP:
        msg = _blank(_Map)
    else:
        msg = _blank(_Message)
    cdef MessageRecord m = <MessageRecord>msg
    m._body = sm.body
    m.message_id = sm.message_id
    timestamp = sm.timestamp
    m.timestamp = timestamp
    m.correlation_id = sm.correlation_id
    reply = sm.reply_to
    m.reply_to = None if reply is None else to_destination(reply[0], reply[1])
    kind = sm.kind
    name = sm.destination
    dest = (_topics if kind is _TOPIC else _queues).get(name)
    m.destination = dest if dest is not None else to_destination(kind, name)
    m.delivery_mode = 2 if sm.persistent else 1
    m.expiration = sm.expiration
    m.priority = sm.priority
    m.redelivered = count > 1
    m.jms_type = sm.jms_type
    m.delivery_time = sm.deliver_at or timestamp
    m.delivery_count = count
    m._properties = sm.properties
    m._props_read_only = True
    m._body_read_only = True
    m._acknowledger = None
    m._delivery_tag = delivery_tag
    return msg


def to_client_message(sm, delivery_tag=-1, count=1):
    """Build the read-only client Message for one delivery (or a browse: tag -1)."""
    return _convert(sm, delivery_tag, count)


cpdef list to_client_messages(list messages, object first_tag, list counts):
    """A run of deliveries (tags ``first_tag``, ``first_tag + 1``...) as client Messages."""
    cdef Py_ssize_t n = len(messages)
    cdef Py_ssize_t i
    cdef Py_ssize_t tag = first_tag
    cdef list out = [None] * n
    if len(counts) < n:
        raise ValueError(f"{n} messages but only {len(counts)} delivery counts")
    for i in range(n):
        out[i] = _convert(messages[i], tag + i, counts[i])
    return out


cdef class DeliverMany:
    """The vm connection's hand-over of a run of deliveries; see the pure twin. A C
    callable: the broker core's dispatch calls it without a Python frame in between."""

    cdef readonly object on_deliveries

    def __init__(self, on_deliveries):
        self.on_deliveries = on_deliveries

    def __call__(self, consumer_id, first_tag, list messages, list counts):
        self.on_deliveries(consumer_id, first_tag, to_client_messages(messages, first_tag, counts))
