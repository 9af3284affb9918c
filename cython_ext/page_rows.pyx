# cython: language_level=3
"""Store rows of the narrow page-in read back as messages, a batch at a time (compiled
twin).

The pure twin ``jmspy/broker_ref/core/page_rows.py`` says why the narrow read exists and
what its packed column holds; ``tests/broker_core/test_page_rows_twins.py`` feeds both the
same rows and requires the same messages, counts and rows left for the full read. Change
one, change the other.

What compiling buys: the per-row unpacking, the delivery-count floor and the tuple are C
work in one loop per batch, and the ``ServerMessage`` is allocated and its sixteen slots
filled directly (``jmspy/_cext/slots.pxd``), as ``cython_ext/message_new.pyx`` does for a
``TextMessage``: the dataclass's generated ``__init__`` is an interpreted frame of sixteen
attribute stores, the largest part of this loop otherwise. The slots are looked up by
name when the module loads, and the load fails if ``ServerMessage`` has a field this
module does not fill.
"""

import dataclasses
import json

from cpython.object cimport PyTypeObject

from jmspy._cext.slots cimport set_slot, slot_offset

from jmspy.broker_ref.core.api import BodyType, DestinationKind, ServerMessage
from jmspy.broker_ref.core.message_codec import _in
from jmspy.broker_ref.core.page_rows import PACKED


cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t nitems)

__all__ = ["PACKED", "narrow_paged"]

#: ServerMessage's fields, in the order of its constructor (checked at load).
_FIELDS = ("message_id", "kind", "destination", "body_type", "body", "properties",
           "persistent", "priority", "timestamp", "expiration", "deliver_at",
           "correlation_id", "reply_to", "jms_type", "producer_connection", "size")
if tuple(f.name for f in dataclasses.fields(ServerMessage)) != _FIELDS:
    raise ImportError("jmspy.broker_ref.core.api.ServerMessage's fields changed: update "
                      "cython_ext/page_rows.pyx and rebuild jmspy's compiled twins")
cdef Py_ssize_t S_ID = slot_offset(ServerMessage, "message_id")
cdef Py_ssize_t S_KIND = slot_offset(ServerMessage, "kind")
cdef Py_ssize_t S_DEST = slot_offset(ServerMessage, "destination")
cdef Py_ssize_t S_BTYPE = slot_offset(ServerMessage, "body_type")
cdef Py_ssize_t S_BODY = slot_offset(ServerMessage, "body")
cdef Py_ssize_t S_PROPS = slot_offset(ServerMessage, "properties")
cdef Py_ssize_t S_PERSISTENT = slot_offset(ServerMessage, "persistent")
cdef Py_ssize_t S_PRIORITY = slot_offset(ServerMessage, "priority")
cdef Py_ssize_t S_TS = slot_offset(ServerMessage, "timestamp")
cdef Py_ssize_t S_EXP = slot_offset(ServerMessage, "expiration")
cdef Py_ssize_t S_AT = slot_offset(ServerMessage, "deliver_at")
cdef Py_ssize_t S_CORR = slot_offset(ServerMessage, "correlation_id")
cdef Py_ssize_t S_REPLY = slot_offset(ServerMessage, "reply_to")
cdef Py_ssize_t S_TYPE = slot_offset(ServerMessage, "jms_type")
cdef Py_ssize_t S_PRODUCER = slot_offset(ServerMessage, "producer_connection")
cdef Py_ssize_t S_SIZE = slot_offset(ServerMessage, "size")

cdef tuple _BODY_TYPES = (BodyType.MESSAGE, BodyType.TEXT, BodyType.BYTES, BodyType.MAP)
cdef tuple _KINDS = (DestinationKind.QUEUE, DestinationKind.TOPIC)
cdef object _MAP = BodyType.MAP
cdef object _SM = ServerMessage
cdef object _loads = json.loads
cdef object _ZERO = 0


cpdef tuple narrow_paged(list rows, object level, bint recovered):
    """The rows of a narrow read as ``(message, delivery count, level)``; see the pure
    twin."""
    cdef Py_ssize_t i, n = len(rows)
    cdef list out = []
    cdef list wide = []
    cdef tuple row
    cdef object packed, body, props, btype, properties, k, v, msg
    cdef long long p, count
    for i in range(n):
        row = <tuple>rows[i]
        packed = row[7]
        if packed is None:
            out.append(None)
            wide.append(i)
            continue
        p = packed
        btype = _BODY_TYPES[p & 3]
        body = row[3]
        props = row[4]
        try:
            if btype is _MAP and body is not None:
                body = {k: _in(v) for k, v in _loads(body).items()}
            properties = _loads(props) if props else {}
        except (ValueError, TypeError, AttributeError):
            out.append(None)
            wide.append(i)
            continue
        count = p >> 8
        if recovered and count < 1:
            count = 1
        msg = PyType_GenericAlloc(<PyTypeObject*>_SM, 0)
        set_slot(msg, S_ID, row[1])
        set_slot(msg, S_KIND, _KINDS[(p >> 2) & 1])
        set_slot(msg, S_DEST, row[2])
        set_slot(msg, S_BTYPE, btype)
        set_slot(msg, S_BODY, body)
        set_slot(msg, S_PROPS, properties)
        set_slot(msg, S_PERSISTENT, (p & 8) != 0)
        set_slot(msg, S_PRIORITY, (p >> 4) & 15)
        set_slot(msg, S_TS, row[5])
        set_slot(msg, S_EXP, _ZERO)
        set_slot(msg, S_AT, _ZERO)
        set_slot(msg, S_CORR, None)
        set_slot(msg, S_REPLY, None)
        set_slot(msg, S_TYPE, None)
        set_slot(msg, S_PRODUCER, _ZERO)
        set_slot(msg, S_SIZE, row[6])
        out.append((msg, count, level))
    return out, wide
