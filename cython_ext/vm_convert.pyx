# cython: language_level=3
"""``vm://`` message mapping: client Message <-> broker ServerMessage (compiled twin).

The pure twin ``jmspy/_pure/vm_convert.py`` documents the semantics;
``tests/test_vm_convert_twins.py`` converts the same random messages with both and
requires identical results. Change one, change the other.

What compiling buys on the delivery side, which runs once per delivered message: the
client Message's ``__slots__`` are filled by storing straight into the instance at the
slot offsets read from the classes' member descriptors at import (the pure twin pays a
descriptor call per attribute), and a run of deliveries is converted in one C loop.
The offsets are checked at import: if ``jmspy.message`` stops declaring one of these
names as a slot, importing this module fails instead of writing to the wrong place.
"""

from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF

from jmspy.broker_ref.core.api import BodyType, DestinationKind, ServerMessage
from jmspy.destinations import Queue, TemporaryQueue, Topic
from jmspy.message import BytesMessage, MapMessage, Message, TextMessage

__all__ = [
    "dest_key",
    "to_client_message",
    "to_client_messages",
    "to_destination",
    "to_server_message",
]


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    PyTypeObject PyMemberDescr_Type


cdef dict _destinations = {}
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
cdef object _ServerMessage = ServerMessage
cdef object _new = object.__new__


cdef Py_ssize_t _offset(object cls, str name) except -1:
    """The byte offset of slot ``name`` in instances of ``cls`` (checked)."""
    descr = None
    for klass in cls.__mro__:
        descr = klass.__dict__.get(name)
        if descr is not None:
            break
    if descr is None or type(descr) is not <object>(<PyObject*>&PyMemberDescr_Type):
        raise ImportError(
            f"jmspy._cext.vm_convert: {cls.__name__}.{name} is not a __slots__ member; "
            "rebuild the compiled twins against this jmspy.message"
        )
    return (<PyMemberDescrObject*><PyObject*>descr).d_member.offset


cdef Py_ssize_t O_ACK = _offset(Message, "_acknowledger")
cdef Py_ssize_t O_BODY_RO = _offset(Message, "_body_read_only")
cdef Py_ssize_t O_TAG = _offset(Message, "_delivery_tag")
cdef Py_ssize_t O_PROPS = _offset(Message, "_properties")
cdef Py_ssize_t O_PROPS_RO = _offset(Message, "_props_read_only")
cdef Py_ssize_t O_CORR = _offset(Message, "correlation_id")
cdef Py_ssize_t O_COUNT = _offset(Message, "delivery_count")
cdef Py_ssize_t O_MODE = _offset(Message, "delivery_mode")
cdef Py_ssize_t O_DTIME = _offset(Message, "delivery_time")
cdef Py_ssize_t O_DEST = _offset(Message, "destination")
cdef Py_ssize_t O_EXP = _offset(Message, "expiration")
cdef Py_ssize_t O_TYPE = _offset(Message, "jms_type")
cdef Py_ssize_t O_ID = _offset(Message, "message_id")
cdef Py_ssize_t O_PRIO = _offset(Message, "priority")
cdef Py_ssize_t O_REDEL = _offset(Message, "redelivered")
cdef Py_ssize_t O_REPLY = _offset(Message, "reply_to")
cdef Py_ssize_t O_TS = _offset(Message, "timestamp")
cdef Py_ssize_t O_TEXT = _offset(TextMessage, "_text")
cdef Py_ssize_t O_DATA = _offset(BytesMessage, "_data")
cdef Py_ssize_t O_POS = _offset(BytesMessage, "_pos")
cdef Py_ssize_t O_MAPBODY = _offset(MapMessage, "_map")


cdef inline void _put(object obj, Py_ssize_t offset, object value) noexcept:
    """Store ``value`` in the slot at ``offset`` (what the slot's descriptor does)."""
    cdef PyObject** slot = <PyObject**>((<char*><PyObject*>obj) + offset)
    cdef PyObject* old = slot[0]
    Py_INCREF(value)
    slot[0] = <PyObject*>value
    Py_XDECREF(old)


cpdef tuple dest_key(object destination):
    """The broker's (kind, name) for a client destination."""
    return (_TOPIC if isinstance(destination, Topic) else _QUEUE, destination.name)


cpdef object to_destination(object kind, str name):
    """The shared client destination for a broker (kind, name)."""
    cdef tuple key = (kind, name)
    dest = _destinations.get(key)
    if dest is None:
        if kind is _TOPIC:
            dest = Topic(name)
        elif name.startswith("temp-queue://"):
            dest = TemporaryQueue(name)
        else:
            dest = Queue(name)
        if len(_destinations) >= _MAX_CACHED_DESTINATIONS:
            _destinations.clear()  # many temporary queues: start over, never grow unbounded
        _destinations[key] = dest
    return dest


cpdef object to_server_message(object message, object connection_id):
    """Copy what the broker needs; the sender may reuse its Message after send()."""
    assert message.destination is not None and message.message_id is not None
    kind, name = dest_key(message.destination)
    if isinstance(message, TextMessage):
        body_type, body = _TEXT, message.text
        size = len(body) if body else 0
    elif isinstance(message, BytesMessage):
        body_type, body = _BYTES, message.body
        size = len(body)
    elif isinstance(message, MapMessage):
        body_type, body = _MAP, dict(message.map)
        size = message.body_size()
    else:
        body_type, body, size = _MESSAGE, None, 0
    reply = message.reply_to
    timestamp = message.timestamp
    delivery_time = message.delivery_time
    deliver_at = delivery_time if delivery_time > timestamp else 0
    return _ServerMessage(
        message.message_id,
        kind,
        name,
        body_type,
        body,
        dict(message._properties),
        message.delivery_mode == 2,
        message.priority,
        timestamp,
        message.expiration,
        deliver_at,
        message.correlation_id,
        dest_key(reply) if reply is not None else None,
        message.jms_type,
        connection_id,
        size + 64,
    )


cdef object _convert(object sm, object delivery_tag, object count):
    cdef object body_type = sm.body_type
    cdef object msg
    if body_type is _TEXT:
        msg = _new(_Text)
        _put(msg, O_TEXT, sm.body)
    elif body_type is _BYTES:
        msg = _new(_Bytes)
        _put(msg, O_DATA, sm.body)
        _put(msg, O_POS, 0)
    elif body_type is _MAP:
        msg = _new(_Map)
        _put(msg, O_MAPBODY, sm.body)
    else:
        msg = _new(_Message)
    _put(msg, O_ID, sm.message_id)
    timestamp = sm.timestamp
    _put(msg, O_TS, timestamp)
    _put(msg, O_CORR, sm.correlation_id)
    reply = sm.reply_to
    _put(msg, O_REPLY, None if reply is None else to_destination(reply[0], reply[1]))
    kind = sm.kind
    name = sm.destination
    dest = _destinations.get((kind, name))
    _put(msg, O_DEST, dest if dest is not None else to_destination(kind, name))
    _put(msg, O_MODE, 2 if sm.persistent else 1)
    _put(msg, O_EXP, sm.expiration)
    _put(msg, O_PRIO, sm.priority)
    _put(msg, O_REDEL, count > 1)
    _put(msg, O_TYPE, sm.jms_type)
    _put(msg, O_DTIME, sm.deliver_at or timestamp)
    _put(msg, O_COUNT, count)
    _put(msg, O_PROPS, sm.properties)
    _put(msg, O_PROPS_RO, True)
    _put(msg, O_BODY_RO, True)
    _put(msg, O_ACK, None)
    _put(msg, O_TAG, delivery_tag)
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
