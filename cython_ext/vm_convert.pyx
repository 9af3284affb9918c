# cython: language_level=3
"""``vm://`` message mapping: client Message <-> broker ServerMessage (compiled twin).

The pure twin ``jmspy/transports/vm_convert.py`` (beside the vm transport) documents the
semantics;
``tests/test_vm_convert_twins.py`` converts the same random messages with both and
requires identical results. Change one, change the other.

What compiling buys on the delivery side, which runs once per delivered message: the
ServerMessage's ``__slots__`` are read and the client Message's filled straight at their
offsets (``jmspy/_cext/slots.pxd``; the pure twin pays a generic attribute lookup per
field), and a run of deliveries is converted in one C loop. The offsets are checked at
import: if a class stops declaring one of these names as a slot, importing this module
fails instead of touching the wrong place.
"""

import dataclasses

from cpython.object cimport PyObject, PyTypeObject

from jmspy._cext.slots cimport get_slot, set_slot, slot_offset

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
cdef object _ServerMessage = ServerMessage


cdef Py_ssize_t O_ACK = slot_offset(Message, "_acknowledger")
cdef Py_ssize_t O_BODY_RO = slot_offset(Message, "_body_read_only")
cdef Py_ssize_t O_TAG = slot_offset(Message, "_delivery_tag")
cdef Py_ssize_t O_PROPS = slot_offset(Message, "_properties")
cdef Py_ssize_t O_PROPS_RO = slot_offset(Message, "_props_read_only")
cdef Py_ssize_t O_CORR = slot_offset(Message, "correlation_id")
cdef Py_ssize_t O_COUNT = slot_offset(Message, "delivery_count")
cdef Py_ssize_t O_MODE = slot_offset(Message, "delivery_mode")
cdef Py_ssize_t O_DTIME = slot_offset(Message, "delivery_time")
cdef Py_ssize_t O_DEST = slot_offset(Message, "destination")
cdef Py_ssize_t O_EXP = slot_offset(Message, "expiration")
cdef Py_ssize_t O_TYPE = slot_offset(Message, "jms_type")
cdef Py_ssize_t O_ID = slot_offset(Message, "message_id")
cdef Py_ssize_t O_PRIO = slot_offset(Message, "priority")
cdef Py_ssize_t O_REDEL = slot_offset(Message, "redelivered")
cdef Py_ssize_t O_REPLY = slot_offset(Message, "reply_to")
cdef Py_ssize_t O_TS = slot_offset(Message, "timestamp")
cdef Py_ssize_t O_TEXT = slot_offset(TextMessage, "_text")
cdef Py_ssize_t O_DATA = slot_offset(BytesMessage, "_data")
cdef Py_ssize_t O_POS = slot_offset(BytesMessage, "_pos")
cdef Py_ssize_t O_MAPBODY = slot_offset(MapMessage, "_map")


cdef Py_ssize_t S_BODY_TYPE = slot_offset(ServerMessage, "body_type")
cdef Py_ssize_t S_BODY = slot_offset(ServerMessage, "body")
cdef Py_ssize_t S_ID = slot_offset(ServerMessage, "message_id")
cdef Py_ssize_t S_TS = slot_offset(ServerMessage, "timestamp")
cdef Py_ssize_t S_CORR = slot_offset(ServerMessage, "correlation_id")
cdef Py_ssize_t S_REPLY = slot_offset(ServerMessage, "reply_to")
cdef Py_ssize_t S_KIND = slot_offset(ServerMessage, "kind")
cdef Py_ssize_t S_DEST = slot_offset(ServerMessage, "destination")
cdef Py_ssize_t S_PERSISTENT = slot_offset(ServerMessage, "persistent")
cdef Py_ssize_t S_EXP = slot_offset(ServerMessage, "expiration")
cdef Py_ssize_t S_PRIO = slot_offset(ServerMessage, "priority")
cdef Py_ssize_t S_TYPE = slot_offset(ServerMessage, "jms_type")
cdef Py_ssize_t S_DELIVER_AT = slot_offset(ServerMessage, "deliver_at")
cdef Py_ssize_t S_PROPS = slot_offset(ServerMessage, "properties")
cdef Py_ssize_t S_PRODUCER = slot_offset(ServerMessage, "producer_connection")
cdef Py_ssize_t S_SIZE = slot_offset(ServerMessage, "size")
_SM_FIELDS = (
    "message_id", "kind", "destination", "body_type", "body", "properties", "persistent",
    "priority", "timestamp", "expiration", "deliver_at", "correlation_id", "reply_to",
    "jms_type", "producer_connection", "size",
)
if tuple(f.name for f in dataclasses.fields(ServerMessage)) != _SM_FIELDS:
    raise ImportError(
        "jmspy._cext.vm_convert fills every ServerMessage field itself and the fields "
        "changed; update to_server_message and _SM_FIELDS, then rebuild"
    )


cdef tuple _NO_ARGS = ()


cdef inline object _blank(object cls):
    """``cls.__new__(cls)`` through the type's C slot: as a Python call (a method lookup
    on the class, then the call) it cost about 800 instructions per message. The classes
    used here define no ``__new__`` of their own (checked at import, below)."""
    return (<PyTypeObject*>cls).tp_new(<type>cls, <PyObject*>_NO_ARGS, NULL)


for _cls in (_Text, _Bytes, _Map, _Message, _ServerMessage):
    if _cls.__new__ is not object.__new__:
        raise ImportError(
            f"{_cls.__qualname__} defines __new__; jmspy._cext.vm_convert creates it without "
            "calling it: update _blank, then rebuild"
        )


cdef inline object _get(object sm, bint fast, Py_ssize_t offset, str name):
    return get_slot(sm, offset, name) if fast else getattr(sm, name)


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
    if not isinstance(message, _Message):
        return _to_server_message(message, connection_id)
    # A Message (or subclass: same slot layout): its headers are read at their slots.
    cdef object destination = get_slot(message, O_DEST, "destination")
    cdef object message_id = get_slot(message, O_ID, "message_id")
    assert destination is not None and message_id is not None
    cdef object cls = type(message)
    if cls is _Text:
        body_type, body = _TEXT, get_slot(message, O_TEXT, "_text")
        size = len(body) if body else 0
    elif cls is _Bytes:
        body_type, body = _BYTES, get_slot(message, O_DATA, "_data")
        size = len(body)
    else:
        return _to_server_message(message, connection_id)
    reply = get_slot(message, O_REPLY, "reply_to")
    timestamp = get_slot(message, O_TS, "timestamp")
    delivery_time = get_slot(message, O_DTIME, "delivery_time")
    sm = _blank(_ServerMessage)
    set_slot(sm, S_ID, message_id)
    kind, name = dest_key(destination)
    set_slot(sm, S_KIND, kind)
    set_slot(sm, S_DEST, name)
    set_slot(sm, S_BODY_TYPE, body_type)
    set_slot(sm, S_BODY, body)
    set_slot(sm, S_PROPS, dict(get_slot(message, O_PROPS, "_properties")))
    set_slot(sm, S_PERSISTENT, get_slot(message, O_MODE, "delivery_mode") == 2)
    set_slot(sm, S_PRIO, get_slot(message, O_PRIO, "priority"))
    set_slot(sm, S_TS, timestamp)
    set_slot(sm, S_EXP, get_slot(message, O_EXP, "expiration"))
    set_slot(sm, S_DELIVER_AT, delivery_time if delivery_time > timestamp else 0)
    set_slot(sm, S_CORR, get_slot(message, O_CORR, "correlation_id"))
    set_slot(sm, S_REPLY, dest_key(reply) if reply is not None else None)
    set_slot(sm, S_TYPE, get_slot(message, O_TYPE, "jms_type"))
    set_slot(sm, S_PRODUCER, connection_id)
    set_slot(sm, S_SIZE, size + 64)
    return sm


cdef object _to_server_message(object message, object connection_id):
    """Any other message (a MapMessage, a bare Message, subclasses): public attributes."""
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
    # ServerMessage's generated __init__ is a Python call with sixteen keyword defaults;
    # every field is set here, straight into its slot (_SM_FIELDS checks the list).
    sm = _blank(_ServerMessage)
    set_slot(sm, S_ID, message.message_id)
    set_slot(sm, S_KIND, kind)
    set_slot(sm, S_DEST, name)
    set_slot(sm, S_BODY_TYPE, body_type)
    set_slot(sm, S_BODY, body)
    set_slot(sm, S_PROPS, dict(message._properties))
    set_slot(sm, S_PERSISTENT, message.delivery_mode == 2)
    set_slot(sm, S_PRIO, message.priority)
    set_slot(sm, S_TS, timestamp)
    set_slot(sm, S_EXP, message.expiration)
    set_slot(sm, S_DELIVER_AT, deliver_at)
    set_slot(sm, S_CORR, message.correlation_id)
    set_slot(sm, S_REPLY, dest_key(reply) if reply is not None else None)
    set_slot(sm, S_TYPE, message.jms_type)
    set_slot(sm, S_PRODUCER, connection_id)
    set_slot(sm, S_SIZE, size + 64)
    return sm


cdef object _convert(object sm, object delivery_tag, object count):
    cdef bint fast = type(sm) is _ServerMessage
    cdef object body_type = _get(sm, fast, S_BODY_TYPE, "body_type")
    cdef object msg
    if body_type is _TEXT:
        msg = _blank(_Text)
        set_slot(msg, O_TEXT, _get(sm, fast, S_BODY, "body"))
    elif body_type is _BYTES:
        msg = _blank(_Bytes)
        set_slot(msg, O_DATA, _get(sm, fast, S_BODY, "body"))
        set_slot(msg, O_POS, 0)
    elif body_type is _MAP:
        msg = _blank(_Map)
        set_slot(msg, O_MAPBODY, _get(sm, fast, S_BODY, "body"))
    else:
        msg = _blank(_Message)
    set_slot(msg, O_ID, _get(sm, fast, S_ID, "message_id"))
    timestamp = _get(sm, fast, S_TS, "timestamp")
    set_slot(msg, O_TS, timestamp)
    set_slot(msg, O_CORR, _get(sm, fast, S_CORR, "correlation_id"))
    reply = _get(sm, fast, S_REPLY, "reply_to")
    set_slot(msg, O_REPLY, None if reply is None else to_destination(reply[0], reply[1]))
    kind = _get(sm, fast, S_KIND, "kind")
    name = _get(sm, fast, S_DEST, "destination")
    dest = (_topics if kind is _TOPIC else _queues).get(name)
    set_slot(msg, O_DEST, dest if dest is not None else to_destination(kind, name))
    set_slot(msg, O_MODE, 2 if _get(sm, fast, S_PERSISTENT, "persistent") else 1)
    set_slot(msg, O_EXP, _get(sm, fast, S_EXP, "expiration"))
    set_slot(msg, O_PRIO, _get(sm, fast, S_PRIO, "priority"))
    set_slot(msg, O_REDEL, count > 1)
    set_slot(msg, O_TYPE, _get(sm, fast, S_TYPE, "jms_type"))
    set_slot(msg, O_DTIME, _get(sm, fast, S_DELIVER_AT, "deliver_at") or timestamp)
    set_slot(msg, O_COUNT, count)
    set_slot(msg, O_PROPS, _get(sm, fast, S_PROPS, "properties"))
    set_slot(msg, O_PROPS_RO, True)
    set_slot(msg, O_BODY_RO, True)
    set_slot(msg, O_ACK, None)
    set_slot(msg, O_TAG, delivery_tag)
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
