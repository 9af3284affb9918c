"""A ServerMessage as bytes, for the store: explicit, versioned JSON rather than pickle.

Two forms. :func:`to_row` / :func:`from_row` give the store one typed SQL column per field
(the body as TEXT or BLOB as it is, properties as JSON only when there are any): SQLite
hands the values back as Python objects from C, so reading a row is a constructor call,
not a parse -- what paging a massive queue back in costs per message (seed 002). The
JSON form (:func:`encode_message`) is the spool's, and layout 1 stores' ``data`` column.

Pickle would tie the data directory to this version's classes (and run code when read);
a store written by an older jmspy must stay readable, and a damaged row must be a clear
error for that row, not a crash. Every field is named; unknown fields are ignored on
read, missing ones take their defaults. A body is stored under the key of its shape --
``text`` (a str), ``bytes`` (base64) or ``map`` -- so none can be mistaken for another; a
bytes value inside a map is base64 under ``{"$b": ...}``, which no JMS map value (always a
primitive) can look like.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from jmspy.errors import MessageFormatException

from ..core.api import BodyType, DestinationKind, ServerMessage

#: ``json.dumps(x, separators=(",", ":"))``, with the encoder made once: dumps builds a
#: new encoder on every call that passes options, and a persistent SEND encodes its
#: properties on the way to the disk.
_dumps = json.JSONEncoder(separators=(",", ":")).encode

__all__ = [
    "FORMAT", "ROW_COLUMNS", "CodecError", "decode_message", "encode_message", "from_row",
    "to_row",
]

#: Written with every row; a reader refuses rows of a newer format it cannot know.
FORMAT = 1


class CodecError(MessageFormatException, ValueError):
    """A stored row that cannot be read back (damaged, or from a newer jmspy)."""


def _out(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {"$b": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _in(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$b"}:
        return base64.b64decode(value["$b"])
    return value


def encode_message(m: ServerMessage) -> bytes:
    body = m.body
    row: dict[str, Any] = {
        "v": FORMAT, "id": m.message_id, "kind": m.kind.value, "dest": m.destination,
        "type": m.body_type.value, "props": m.properties,
        "persistent": m.persistent, "priority": m.priority, "ts": m.timestamp,
        "exp": m.expiration, "at": m.deliver_at, "corr": m.correlation_id,
        "reply": [m.reply_to[0].value, m.reply_to[1]] if m.reply_to is not None else None,
        "jms_type": m.jms_type, "size": m.size,
    }
    if isinstance(body, dict):
        row["map"] = {k: _out(v) for k, v in body.items()}
    elif isinstance(body, bytes | bytearray):
        row["bytes"] = base64.b64encode(bytes(body)).decode("ascii")
    elif body is not None:
        row["text"] = body
    return _dumps(row).encode()


def decode_message(data: bytes) -> ServerMessage:
    try:
        row = json.loads(data)
        if not isinstance(row, dict):
            raise CodecError("a stored message is not a JSON object")
        version = row.get("v", 1)
        if version > FORMAT:
            raise CodecError(f"stored message format {version} is newer than this jmspy "
                             f"reads ({FORMAT}); upgrade jmspy to read this data directory")
        body: Any = row.get("text")
        if "bytes" in row:
            body = base64.b64decode(row["bytes"])
        elif "map" in row:
            body = {k: _in(v) for k, v in row["map"].items()}
        reply = row.get("reply")
        return ServerMessage(
            message_id=row["id"],
            kind=DestinationKind(row["kind"]),
            destination=row["dest"],
            body_type=BodyType(row.get("type", "message")),
            body=body,
            properties=dict(row.get("props") or {}),
            persistent=bool(row.get("persistent", True)),
            priority=int(row.get("priority", 4)),
            timestamp=int(row.get("ts", 0)),
            expiration=int(row.get("exp", 0)),
            deliver_at=int(row.get("at", 0)),
            correlation_id=row.get("corr"),
            reply_to=(DestinationKind(reply[0]), reply[1]) if reply else None,
            jms_type=row.get("jms_type"),
            size=int(row.get("size", 0)),
        )
    except CodecError:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise CodecError(f"a stored message cannot be read: {type(exc).__name__}: {exc}"
                         ) from None


#: The store's message columns, in :func:`to_row` order.
ROW_COLUMNS = ("kind", "dest", "body_type", "body", "props", "persistent", "priority", "ts",
               "exp", "at", "corr", "reply_kind", "reply_name", "jms_type", "size")

_KINDS = {k.value: k for k in DestinationKind}
_BODY_TYPES = {b.value: b for b in BodyType}
_MAP = BodyType.MAP


def to_row(m: ServerMessage) -> tuple[Any, ...]:
    """``m`` as the values of :data:`ROW_COLUMNS`."""
    body: Any = m.body
    if m.body_type is _MAP and body is not None:
        body = _dumps({k: _out(v) for k, v in body.items()})
    elif isinstance(body, bytearray):
        body = bytes(body)
    reply = m.reply_to
    # ``_value_``: the member's value without the enum's ``value`` descriptor (two Python
    # calls each, per stored message)
    return (m.kind._value_, m.destination, m.body_type._value_, body,
            _dumps(m.properties) if m.properties else None,
            m.persistent, m.priority, m.timestamp, m.expiration, m.deliver_at,
            m.correlation_id, None if reply is None else reply[0]._value_,
            None if reply is None else reply[1], m.jms_type, m.size)


def from_row(message_id: str, row: tuple[Any, ...] | list[Any]) -> ServerMessage:
    """The message whose :data:`ROW_COLUMNS` values are ``row``."""
    try:
        (kind, dest, body_type, body, props, persistent, priority, ts, exp, at, corr,
         reply_kind, reply_name, jms_type, size) = row
        btype = _BODY_TYPES[body_type]
        if btype is _MAP and body is not None:
            body = {k: _in(v) for k, v in json.loads(body).items()}
        return ServerMessage(
            message_id, _KINDS[kind], dest, btype, body,
            json.loads(props) if props else {}, bool(persistent), priority, ts, exp, at,
            corr, None if reply_kind is None else (_KINDS[reply_kind], reply_name),
            jms_type, 0, size)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CodecError(f"a stored message cannot be read: {type(exc).__name__}: {exc}"
                         ) from None
