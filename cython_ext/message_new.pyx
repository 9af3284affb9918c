# cython: language_level=3
"""New messages of every type, as the session's ``create_*_message`` makes them (compiled
twin).

The pure twin ``jmspy/_pure/message_new.py`` says why; ``tests/test_message_new_twins.py``
compares every field of both twins' messages. Change one, change the other (and both when a
message class's ``__init__`` changes: the test compares against them).

The instance is allocated without running ``__init__`` and its fields (a typed record,
``jmspy/_cext/message_record.pxd``) are set as ``Message.__init__`` sets them. Properties
take the helpers' fast paths inline (a name already validated and remembered; a bool,
str, float, None or 64-bit int value) and call
``jmspy.message``'s own checks for anything else, so every refusal is their error; a body
the fast path does not take as it is (a text that is not a str, a bytearray, map values to
check one by one) goes to the class's own constructor, which decides.
"""

from cpython.object cimport PyObject, PyTypeObject

from jmspy._cext.message_record cimport MessageRecord

__all__ = ["new_bytes_message", "new_map_message", "new_message", "new_text_message"]

# jmspy.message never imports this module (the session does), so loading it here meets no
# cycle.
from jmspy import message as _m

cdef type _Message = _m.Message
cdef type _TextMessage = _m.TextMessage
cdef type _BytesMessage = _m.BytesMessage
cdef type _MapMessage = _m.MapMessage
cdef object _valid_name = _m._valid_property_name
cdef object _check_value = _m._check_property_value
cdef set _VALID_NAMES = _m._VALID_NAMES
cdef object _LONG_MIN = _m._LONG_MIN
cdef object _LONG_MAX = _m._LONG_MAX
cdef object _PERSISTENT = _m.DeliveryMode.PERSISTENT
cdef object _ZERO = 0
cdef object _FOUR = 4
cdef object _MINUS_ONE = -1
cdef tuple _NO_ARGS = ()
# Under JMSPY_PUREPYTHON the messages are built on the pure record, which this module
# cannot fill: every call then goes to the constructor (the twin tests import it anyway).
cdef bint _RECORDS = issubclass(_Message, MessageRecord)


cdef inline bint _plain(object body, type kind, object properties):
    """Whether the fast path takes ``body`` and ``properties`` as they are."""
    return _RECORDS and (body is None or type(body) is kind) and (
        properties is None or type(properties) is dict)


cdef object _new(type cls, dict properties, object body):
    """A ``cls`` with ``Message.__init__``'s fields, ``properties`` checked, ``body`` as
    its body."""
    cdef dict props = {}
    cdef object key, value
    if properties:
        for key, value in properties.items():
            if not (type(key) is str and key in _VALID_NAMES):
                key = _valid_name(key)
            if value is None or type(value) is bool or type(value) is str or type(value) is float:
                pass
            elif type(value) is int and _LONG_MIN <= value <= _LONG_MAX:
                pass
            else:
                value = _check_value(key, value)
            props[key] = value
    cdef object msg = (<PyTypeObject*>cls).tp_new(cls, <PyObject*>_NO_ARGS, NULL)
    cdef MessageRecord r = <MessageRecord>msg
    r.message_id = None
    r.timestamp = _ZERO
    r.correlation_id = None
    r.reply_to = None
    r.destination = None
    r.delivery_mode = _PERSISTENT
    r.expiration = _ZERO
    r.priority = _FOUR
    r.redelivered = False
    r.jms_type = None
    r.delivery_time = _ZERO
    r.delivery_count = _ZERO
    r._properties = props
    r._props_read_only = False
    r._body_read_only = False
    r._acknowledger = None
    r._delivery_tag = _MINUS_ONE
    r._body = body
    return msg


cpdef new_message(object properties=None):
    """``Message(properties)``; see the pure twin."""
    if not _plain(None, type(None), properties):
        return _Message(properties)
    return _new(_Message, properties, None)


cpdef new_text_message(object text=None, object properties=None):
    """``TextMessage(text, properties)``; see the pure twin."""
    if not _plain(text, str, properties):
        return _TextMessage(text, properties)  # the constructor decides (or refuses)
    return _new(_TextMessage, properties, text)


cpdef new_bytes_message(object data=None, object properties=None):
    """``BytesMessage(data, properties)``; see the pure twin."""
    if not _plain(data, bytes, properties):
        return _BytesMessage(data, properties)
    msg = _new(_BytesMessage, properties, b"" if data is None else data)
    msg._pos = 0
    return msg


cpdef new_map_message(object values=None, object properties=None):
    """``MapMessage(values, properties)``; see the pure twin. Values are checked one by
    one by ``MapMessage.set``, so any go to the constructor."""
    if values or not _plain(None, dict, properties):
        return _MapMessage(values, properties)
    return _new(_MapMessage, properties, {})
