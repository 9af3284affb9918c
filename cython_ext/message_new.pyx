# cython: language_level=3
"""A new TextMessage (compiled twin).

The pure twin ``jmspy/_pure/message_new.py`` says why; ``tests/test_message_new_twins.py``
compares every slot of both twins' messages. Change one, change the other (and both when
``Message.__init__`` or ``TextMessage.__init__`` change: the test compares against them).

The instance is allocated without running ``__init__`` and its slots are filled as
``Message.__init__`` fills them. Properties take the helpers' fast paths inline (a name
already validated and remembered; a bool, str, float, None or 64-bit int value) and call
``jmspy.message``'s own checks for anything else, so every refusal is their error.
"""

from cpython.object cimport PyTypeObject

from jmspy._cext.slots cimport set_slot, slot_offset


cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t nitems)

__all__ = ["new_text_message"]

cdef object _TextMessage = None
cdef object _valid_name = None
cdef object _check_value = None
cdef set _VALID_NAMES = None
cdef object _LONG_MIN, _LONG_MAX, _PERSISTENT
cdef Py_ssize_t S_ID, S_TS, S_CORR, S_REPLY, S_DEST, S_MODE, S_EXP, S_PRIO, S_REDEL
cdef Py_ssize_t S_TYPE, S_TIME, S_COUNT, S_PROPS, S_PROPS_RO, S_BODY_RO, S_ACK, S_TAG
cdef Py_ssize_t S_TEXT
cdef object _ZERO = 0
cdef object _FOUR = 4
cdef object _MINUS_ONE = -1


cdef int _load() except -1:
    global _TextMessage, _valid_name, _check_value, _VALID_NAMES, _LONG_MIN, _LONG_MAX
    global _PERSISTENT, S_ID, S_TS, S_CORR, S_REPLY, S_DEST, S_MODE, S_EXP, S_PRIO
    global S_REDEL, S_TYPE, S_TIME, S_COUNT, S_PROPS, S_PROPS_RO, S_BODY_RO, S_ACK, S_TAG
    global S_TEXT
    from jmspy import message as m
    T = m.TextMessage
    S_ID = slot_offset(T, "message_id")
    S_TS = slot_offset(T, "timestamp")
    S_CORR = slot_offset(T, "correlation_id")
    S_REPLY = slot_offset(T, "reply_to")
    S_DEST = slot_offset(T, "destination")
    S_MODE = slot_offset(T, "delivery_mode")
    S_EXP = slot_offset(T, "expiration")
    S_PRIO = slot_offset(T, "priority")
    S_REDEL = slot_offset(T, "redelivered")
    S_TYPE = slot_offset(T, "jms_type")
    S_TIME = slot_offset(T, "delivery_time")
    S_COUNT = slot_offset(T, "delivery_count")
    S_PROPS = slot_offset(T, "_properties")
    S_PROPS_RO = slot_offset(T, "_props_read_only")
    S_BODY_RO = slot_offset(T, "_body_read_only")
    S_ACK = slot_offset(T, "_acknowledger")
    S_TAG = slot_offset(T, "_delivery_tag")
    S_TEXT = slot_offset(T, "_text")
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
    cdef object msg = PyType_GenericAlloc(<PyTypeObject*>_TextMessage, 0)
    set_slot(msg, S_ID, None)
    set_slot(msg, S_TS, _ZERO)
    set_slot(msg, S_CORR, None)
    set_slot(msg, S_REPLY, None)
    set_slot(msg, S_DEST, None)
    set_slot(msg, S_MODE, _PERSISTENT)
    set_slot(msg, S_EXP, _ZERO)
    set_slot(msg, S_PRIO, _FOUR)
    set_slot(msg, S_REDEL, False)
    set_slot(msg, S_TYPE, None)
    set_slot(msg, S_TIME, _ZERO)
    set_slot(msg, S_COUNT, _ZERO)
    set_slot(msg, S_PROPS, props)
    set_slot(msg, S_PROPS_RO, False)
    set_slot(msg, S_BODY_RO, False)
    set_slot(msg, S_ACK, None)
    set_slot(msg, S_TAG, _MINUS_ONE)
    set_slot(msg, S_TEXT, text)
    return msg
