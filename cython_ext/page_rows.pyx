# cython: language_level=3
"""Store rows of the narrow page-in read back as messages, a batch at a time (compiled
twin).

The pure twin ``jmspy/broker_ref/store/page_rows.py`` says why the narrow read exists and
what its packed column holds; ``tests/broker_core/test_page_rows_twins.py`` feeds both the
same rows and requires the same messages, counts and rows left for the full read. Change
one, change the other.

What compiling buys: the per-row unpacking, the delivery-count floor and the tuple are C
work in one loop per batch, and the ``ServerMessage`` (a typed record,
``jmspy/_cext/records.pxd``) is allocated and its fields set directly: the generated
``__init__`` would parse sixteen keywords per row. Runs on the compiled records only.
"""

import json

from jmspy._cext.records cimport ServerMessage

from jmspy.broker_ref.core.kinds import BodyType, DestinationKind
from jmspy.broker_ref.store.message_codec import _in
from jmspy.broker_ref.store.page_rows import PACKED

__all__ = ["PACKED", "narrow_paged"]

cdef tuple _BODY_TYPES = (BodyType.MESSAGE, BodyType.TEXT, BodyType.BYTES, BodyType.MAP)
cdef tuple _KINDS = (DestinationKind.QUEUE, DestinationKind.TOPIC)
cdef object _MAP = BodyType.MAP
cdef object _loads = json.loads
cdef object _ZERO = 0


cpdef tuple narrow_paged(list rows, object level, bint recovered):
    """The rows of a narrow read as ``(message, delivery count, level)``; see the pure
    twin."""
    cdef Py_ssize_t i, n = len(rows)
    cdef list out = []
    cdef list wide = []
    cdef tuple row
    cdef object packed, body, props, btype, properties, k, v
    cdef ServerMessage msg
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
        msg = ServerMessage.__new__(ServerMessage)  # Cython: a direct tp_new call
        msg.message_id = row[1]
        msg.kind = _KINDS[(p >> 2) & 1]
        msg.destination = row[2]
        msg.body_type = btype
        msg.body = body
        msg.properties = properties
        msg.persistent = (p & 8) != 0
        msg.priority = (p >> 4) & 15
        msg.timestamp = row[5]
        msg.expiration = _ZERO
        msg.deliver_at = _ZERO
        msg.producer_connection = _ZERO
        msg.size = row[6]
        out.append((msg, count, level))
    return out, wide
