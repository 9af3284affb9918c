# cython: language_level=3
"""A new TextMessage (compiled twin).

The pure twin ``jmspy/_pure/message_new.py`` says why; ``tests/test_message_new_twins.py``
compares every field of both twins' messages. Change one, change the other (and both when
``Message.__init__`` or ``TextMessage.__init__`` change: the test compares against them).

The instance is allocated without running ``__init__`` and its fields (a typed record,
``jmspy/_cext/message_record.pxd``) are set as ``Message.__init__`` sets them. Properties take the helpers' fast paths inline (a name
already validated and remembered; a bool, str, float, None or 64-bit int value) and call
``jmspy.message``'s own checks for anything else, so every refusal is their error.
"""

from cpython.object cimport PyObject, PyTypeObject

from jmspy._cext.message_record cimport MessageRecord

__all__ = ["new_text_message"]

cdef object _TextMessage = None
cdef object _valid_name = None
cdef object _check_value = None
cdef set _VALID_NAMES = None
cdef object _LONG_MIN, _LONG_MAX, _PERSISTENT
cdef object _ZERO = 0
cdef object _FOUR = 4
cdef object _MINUS_ONE = -1
cdef tuple _NO_ARGS = ()


cdef int _load() except -1:
    global _TextMessage, _valid_name, _check_value, _VALID_NAMES, _LONG_MIN, _LONG_MAX
    global _PERSISTENT
    from jmspy import message as m
    T = m.TextMessage
    if not issubclass(T, MessageRecord):
        raise ImportError("jmspy.message.TextMessage is not built on the compiled message "
                          "record; rebuild jmspy's compiled twins")
    _valid_name = m._valid_property_name
    _check_value = m._check_property_value
    _VALID_NAMES = m._VALID_NAMES
    _LONG_MIN = m._LONG_MIN
    _LONG_MAX = m._LONG_MAX
    _PERSISTENT = m.DeliveryMode.PERSISTENT
    _TextMessage = T
    return 0


cpdef new_text_message(object text=None, object properties=None):
    """``TextMessage(text, properties)``; see the pure twin."""
    if _TextMessage is None:
        _load()
    if (text is not None and type(text) is not str) or (
            properties is not None and type(properties) is not dict):
        return _TextMessage(text, properties)  # the constructor decides (or refuses)
    cdef dict props = {}
    cdef object key, value
    if properties:
        for key, value in (<dict>properties).items():
            if not (type(key) is str and key in _VALID_NAMES):
                key = _valid_name(key)
            if value is None or type(value) is bool or type(value) is str or type(value) is float:
                pass
            elif type(value) is int and _LONG_MIN <= value <= _LONG_MAX:
                pass
            else:
                value = _check_value(key, value)
            props[key] = value
    cdef object msg = (<PyTypeObject*>_TextMessage).tp_new(<type>_TextMessage,
                                                           <PyObject*>_NO_ARGS, NULL)
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
    r._body = text
    return msg
