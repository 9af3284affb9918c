"""A received STOMP MESSAGE frame as a client Message.

The ``stomp://`` transport converts every MESSAGE it receives here, on stomp.py's receiver
thread, which on a busy consumer is the client's busiest thread. Its compiled twin
(``cython_ext/stomp_received.pyx``) was retired by the twin ledger's rule
(benchmarks/README.md): with it pure, ``build_compare --over stomp`` ran 1.02x as fast
end to end and 0.97x on the listener path, inside that run's noise.

What the headers mean is :mod:`jmspy.transports.stomp.mapping`'s (the reserved names,
destinations, expiry forms); this module only reads them.
"""

from __future__ import annotations

import json
from typing import Any, Final

from jmspy.message import (
    BytesMessage,
    MapMessage,
    Message,
    PropertyValue,
    TextMessage,
    finish_received,
)
from jmspy.property_codes import typed
from jmspy.stomp_jms_header import HEADER as JMS_HEADER
from jmspy.stomp_jms_header import read_header
from jmspy.transports.stomp.mapping import (
    RESERVED_HEADERS,
    absolute_expiration,
    header_int,
    parse_destination,
    unfolded_message_id,
)

__all__ = ["derived_sizes", "from_frame"]


# A consumer sees the same few header layouts and property-type lists on every MESSAGE,
# so what it derives from them is kept (bounded, forgotten past _DERIVED_MAX of each; the
# values are shared: read, never changed). Deriving them per message was a fifth of a
# stomp:// consumer's conversion.
_DERIVED_MAX: Final = 256
_NO_CODES: Final[dict[str, str]] = {}
_codes: dict[str, dict[str, str]] = {}
_names: dict[tuple[str, ...], tuple[str, ...]] = {}


def _ptype_codes(ptypes: str) -> dict[str, str]:
    """``"a=i,b=f"`` as ``{"a": "i", "b": "f"}`` (items without ``=`` left out; a name
    given twice keeps its last code)."""
    codes = _codes.get(ptypes)
    if codes is None:
        codes = dict(item.split("=", 1) for item in ptypes.split(",") if "=" in item)
        if len(_codes) >= _DERIVED_MAX:
            _codes.clear()
        _codes[ptypes] = codes
    return codes


def _property_names(headers: dict[str, str]) -> tuple[str, ...]:
    """The names among ``headers`` that are application properties, in frame order:
    not a STOMP or broker header, not one of jmspy's own."""
    layout = tuple(headers)
    names = _names.get(layout)
    if names is None:
        names = tuple(n for n in layout if n not in RESERVED_HEADERS and not n.startswith("jmspy-"))
        if len(_names) >= _DERIVED_MAX:
            _names.clear()
        _names[layout] = names
    return names


def derived_sizes() -> tuple[int, int]:
    """(types texts, header layouts) kept now: both stay bounded."""
    return len(_codes), len(_names)


def from_frame(headers: dict[str, str], body: bytes | str) -> Message:
    """A read-only client Message from a MESSAGE frame (delivery count set by the caller).

    Once per message on the receiving thread, so the headers are read with one bound
    ``get`` and the helpers are called only for headers the frame has."""
    raw = body.encode("utf-8") if isinstance(body, str) else (body or b"")
    get = headers.get
    value = get(JMS_HEADER)
    read = None if value is None else read_header(value)
    kind: str | None
    message_id: str | None
    if read is not None:
        timestamp, kind, ptypes, message_id = read
        kind = kind or None
    else:  # a raw client's message, or one from a jmspy before the one header
        kind = get("jmspy-body")
        ptypes = get("jmspy-ptypes", "")
        message_id = unfolded_message_id(headers)
        timestamp = header_int(get("jmspy-timestamp") or get("timestamp"))
    if kind is None:
        ctype = get("content-type", "")
        if ctype.startswith("text/") or (not ctype and "content-length" not in headers):
            kind = "text"
        else:
            kind = "bytes"
    msg: Message
    if kind == "text" or kind == "null-text":
        msg = TextMessage.__new__(TextMessage)
        msg._body = raw.decode("utf-8", errors="replace") if kind == "text" else None
    elif kind == "bytes":
        msg = BytesMessage.__new__(BytesMessage)
        msg._body = raw
        msg._pos = 0
    elif kind == "map":
        msg = MapMessage.__new__(MapMessage)
        decoded: dict[str, Any] = json.loads(raw.decode("utf-8") or "{}")
        msg._body = {
            k: bytes.fromhex(v["b64"]) if isinstance(v, dict) else v for k, v in decoded.items()
        }
    else:
        msg = Message.__new__(Message)
        msg._body = None
    props: dict[str, PropertyValue] = {}
    names = _property_names(headers)
    if names:
        codes = _ptype_codes(ptypes) if ptypes else _NO_CODES
        for name in names:
            text = headers[name]
            code = codes.get(name)
            if code is None:
                props[name] = text
                continue
            try:
                props[name] = typed(text, code)
            except ValueError:
                props[name] = text
    msg.message_id = message_id
    msg.timestamp = timestamp
    msg.correlation_id = get("correlation-id")
    reply_to = get("reply-to")
    msg.reply_to = parse_destination(reply_to) if reply_to else None
    msg.destination = parse_destination(get("destination"))
    persistent = get("persistent")
    msg.delivery_mode = 2 if persistent and persistent.lower() == "true" else 1
    msg.expiration = header_int(get("expires"))
    if not msg.expiration and "expiration" in headers:
        msg.expiration = absolute_expiration(headers["expiration"], timestamp)
    msg.priority = header_int(get("priority"), 4)
    msg.jms_type = get("type")
    msg.delivery_time = timestamp
    return finish_received(msg, props)
