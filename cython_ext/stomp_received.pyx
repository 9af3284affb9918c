# cython: language_level=3
"""A received STOMP MESSAGE frame as a client Message (compiled twin).

The pure twin ``jmspy/transports/stomp/received.py`` (beside the ``stomp://`` transport)
says what each header means and why this runs per message; ``tests/
test_stomp_received_twins.py`` converts the same random frames with both and requires the
same message, or the same error. Change one, change the other.

What compiling buys, once per message a ``stomp://`` consumer receives (on stomp.py's
receiver thread): the message is allocated through its type's C slot and its fields are
the client record's C fields (``jmspy/_cext/message_record.pxd``), the ``jmspy-jms``
header is split without building its named tuple, and the per-header loop that picks out
the properties runs in C over the names kept for the frame's header layout.
"""

from cpython.object cimport PyObject, PyTypeObject

from jmspy._cext.message_record cimport MessageRecord

import json

from jmspy.message import BytesMessage, MapMessage, Message, TextMessage
from jmspy.property_codes import typed
from jmspy.stomp_jms_header import HEADER
from jmspy.transports.stomp.mapping import (
    RESERVED_HEADERS,
    absolute_expiration,
    parse_destination,
    unfolded_message_id,
)

__all__ = ["derived_sizes", "from_frame"]


cdef object _Text = TextMessage
cdef object _Bytes = BytesMessage
cdef object _Map = MapMessage
cdef object _Message = Message
cdef tuple _NO_ARGS = ()
cdef str _HEADER = HEADER
cdef object _RESERVED = RESERVED_HEADERS
cdef object _typed = typed  # one table of type codes (jmspy/property_codes.py)
cdef Py_ssize_t _DERIVED_MAX = 256
cdef dict _NO_CODES = {}
cdef dict _codes = {}
cdef dict _names = {}


cdef inline object _blank(object cls):
    """``cls.__new__(cls)`` through the type's C slot (every record field None)."""
    return (<PyTypeObject*>cls).tp_new(<type>cls, <PyObject*>_NO_ARGS, NULL)


cdef object _header_int(object text, object default):
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        return default


cdef dict _ptype_codes(object ptypes):
    cdef dict codes = _codes.get(ptypes)
    if codes is None:
        codes = {}
        for item in ptypes.split(","):
            if "=" in item:
                name, code = item.split("=", 1)
                codes[name] = code
        if len(_codes) >= _DERIVED_MAX:
            _codes.clear()
        _codes[ptypes] = codes
    return codes


cdef tuple _property_names(dict headers):
    cdef tuple layout = tuple(headers)
    cdef tuple names = _names.get(layout)
    cdef list picked
    if names is None:
        picked = []
        for name in layout:
            if name not in _RESERVED and not name.startswith("jmspy-"):
                picked.append(name)
        names = tuple(picked)
        if len(_names) >= _DERIVED_MAX:
            _names.clear()
        _names[layout] = names
    return names


def derived_sizes():
    """(types texts, header layouts) kept now: both stay bounded."""
    return len(_codes), len(_names)


def from_frame(dict headers, body):
    """A read-only client Message from a MESSAGE frame (delivery count set by the caller)."""
    cdef object raw  # bytes from jmspy's reader; any bytes-like reads as the pure twin reads it
    if isinstance(body, str):
        raw = (<str>body).encode("utf-8")
    else:
        raw = body or b""
    # the jmspy-jms header (jmspy/stomp_jms_header.py: parse_header), split in place
    cdef object jms = headers.get(_HEADER)
    cdef list parts = None
    cdef object timestamp = None
    if jms is not None:
        parts = jms.split(";", 4)
        if len(parts) != 5 or parts[0] != "1":
            parts = None
        else:
            try:
                timestamp = int(parts[1])
            except ValueError:
                parts = None
    cdef object kind
    cdef object ptypes
    if parts is not None:
        kind = parts[2] or None
        ptypes = parts[3]
    else:  # a raw client's message, or one from a jmspy before the one header
        kind = headers.get("jmspy-body")
        ptypes = headers.get("jmspy-ptypes", "")
    if kind is None:
        ctype = headers.get("content-type", "")
        if ctype.startswith("text/") or (not ctype and "content-length" not in headers):
            kind = "text"
        else:
            kind = "bytes"
    cdef object msg
    cdef object value
    if kind == "text" or kind == "null-text":
        msg = _blank(_Text)
        value = raw.decode("utf-8", errors="replace") if kind == "text" else None
    elif kind == "bytes":
        msg = _blank(_Bytes)
        value = raw
        msg._pos = 0
    elif kind == "map":
        msg = _blank(_Map)
        decoded = json.loads(raw.decode("utf-8") or "{}")
        value = {
            k: bytes.fromhex(v["b64"]) if isinstance(v, dict) else v for k, v in decoded.items()
        }
    else:
        msg = _blank(_Message)
        value = None
    cdef MessageRecord m = <MessageRecord>msg
    m._body = value
    cdef dict codes = _ptype_codes(ptypes) if ptypes else _NO_CODES
    cdef dict props = {}
    cdef object code
    for name in _property_names(headers):
        value = headers[name]
        code = codes.get(name)
        if code is None:
            props[name] = value
            continue
        try:
            props[name] = _typed(value, code)
        except ValueError:
            props[name] = value
    if parts is not None:
        m.message_id = parts[4]
    else:
        m.message_id = unfolded_message_id(headers)
        timestamp = _header_int(headers.get("jmspy-timestamp") or headers.get("timestamp"), 0)
    m.timestamp = timestamp
    m.correlation_id = headers.get("correlation-id")
    reply = headers.get("reply-to")
    m.reply_to = parse_destination(reply) if reply else None  # what it returns for ""
    m.destination = parse_destination(headers.get("destination"))
    m.delivery_mode = 2 if headers.get("persistent", "").lower() == "true" else 1
    expiration = _header_int(headers.get("expires"), 0)
    if not expiration and "expiration" in headers:
        expiration = absolute_expiration(headers["expiration"], timestamp)
    m.expiration = expiration
    m.priority = _header_int(headers.get("priority"), 4)
    m.jms_type = headers.get("type")
    m.delivery_time = timestamp
    # finish_received (jmspy/message.py): first delivery, read-only
    m.redelivered = False
    m.delivery_count = 1
    m._properties = props
    m._props_read_only = True
    m._body_read_only = True
    m._acknowledger = None
    m._delivery_tag = -1
    return msg
