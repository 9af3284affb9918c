"""Messages as Spark rows, and rows as messages.

The schema (:data:`SCHEMA`): ``message_id``, ``destination`` (``queue://x`` /
``topic://x``), ``timestamp`` (UTC), ``priority``, ``redelivered``, ``delivery_count``,
``correlation_id``, ``type``, ``properties`` (a map of strings: numbers and booleans as
their text, bytes as hex), the body in ``text`` (a TextMessage) or ``bytes`` (a
BytesMessage; a MapMessage's map as JSON text in ``text``), then ``reply_to``
(``queue://x``, or null), ``expiration`` (UTC, null: never), ``delivery_mode``
(``PERSISTENT`` / ``NON_PERSISTENT``) and ``typed_properties``: the properties with their
types kept, a map from name to a struct whose ``type`` says which one field holds the
value (``"string"`` -> ``string``, ``"long"`` -> ``long``, ``"double"`` -> ``double``,
``"boolean"`` -> ``boolean``; the others null). JMS property values are one of those four
kinds; ``properties`` keeps the same values as text for the queries that want strings.

Writing maps columns back by name (any subset): ``text`` or ``bytes`` (or ``body``, text
or binary), ``properties`` (a map; its values keep their Python types), ``typed_properties``
(as read: each value taken from the field its ``type`` names; these win over
``properties`` of the same name), ``priority``, ``correlation_id``, ``type``, ``reply_to``,
``delivery_mode`` ("PERSISTENT" / "NON_PERSISTENT" or 2 / 1), ``time_to_live`` (ms), and
``dup_id``, the message's duplicate-detection id (otherwise one is made per row).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Any

from jmspy.destinations import Destination, Queue, Topic
from jmspy.message import BytesMessage, DeliveryMode, MapMessage, Message, TextMessage
from jmspy.property_value import PropertyValue
from jmspy.session import Session

__all__ = ["PROPERTY_TYPES", "SCHEMA", "fields_of", "row_from", "row_of", "to_message"]

SCHEMA = ("message_id STRING, destination STRING, timestamp TIMESTAMP, priority INT, "
          "redelivered BOOLEAN, delivery_count INT, correlation_id STRING, type STRING, "
          "properties MAP<STRING, STRING>, text STRING, bytes BINARY, reply_to STRING, "
          "expiration TIMESTAMP, delivery_mode STRING, "
          "typed_properties MAP<STRING, STRUCT<type: STRING, string: STRING, long: BIGINT, "
          "double: DOUBLE, boolean: BOOLEAN>>")

#: ``typed_properties``' struct: the type names, in the order of the struct's value fields
PROPERTY_TYPES = ("string", "long", "double", "boolean")

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _typed(value: object) -> tuple[Any, ...]:
    """A property value as ``typed_properties``' struct (type, string, long, double,
    boolean)."""
    if isinstance(value, bool):
        return ("boolean", None, None, None, value)
    if isinstance(value, int):
        return ("long", None, value, None, None)
    if isinstance(value, float):
        return ("double", None, None, value, None)
    return ("string", str(value), None, None, None)


def _untyped(name: str, struct: Any) -> PropertyValue:
    """A ``typed_properties`` value (a Row, a dict or a tuple) back to its Python value."""
    if isinstance(struct, Mapping):
        fields = tuple(struct.get(k) for k in ("type", *PROPERTY_TYPES))
    else:
        fields = tuple(struct)
    kind = fields[0]
    if kind not in PROPERTY_TYPES:
        raise ValueError(f"typed_properties[{name!r}]: type {kind!r} must be one of "
                         f"{', '.join(PROPERTY_TYPES)}")
    value: PropertyValue = fields[1 + PROPERTY_TYPES.index(kind)]
    return value


def fields_of(message: Message) -> tuple[Any, ...]:
    """What a row needs of a message, cheaply (the reader's driver-side worker takes every
    message of a stream: the conversions are :func:`row_from`'s, on the executors)."""
    text: str | None = None
    data: bytes | None = None
    if isinstance(message, TextMessage):
        text = message.text
    elif isinstance(message, BytesMessage):
        data = message.body
    elif isinstance(message, MapMessage):
        text = json.dumps({k: _text(v) for k, v in message.map.items()})
    destination = message.destination
    props = message.properties
    reply_to = message.reply_to
    return (message.message_id, None if destination is None else str(destination),
            message.timestamp, message.priority, message.redelivered,
            message.delivery_count, message.correlation_id, message.jms_type,
            dict(props) if props else None, text, data,
            None if reply_to is None else str(reply_to), message.expiration,
            message.delivery_mode)


def row_from(fields: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row of :data:`SCHEMA` from :func:`fields_of`'s tuple."""
    (message_id, destination, timestamp, priority, redelivered, count, correlation,
     jms_type, props, text, data, reply_to, expiration, mode) = fields
    kept = {k: v for k, v in props.items() if v is not None} if props else {}
    return (message_id, destination,
            _EPOCH + _dt.timedelta(milliseconds=timestamp) if timestamp else None,
            priority, redelivered, count, correlation, jms_type,
            {k: _text(v) for k, v in kept.items()},
            text, data, reply_to,
            _EPOCH + _dt.timedelta(milliseconds=expiration) if expiration else None,
            "NON_PERSISTENT" if mode == DeliveryMode.NON_PERSISTENT else "PERSISTENT",
            {k: _typed(v) for k, v in kept.items()})


def row_of(message: Message) -> tuple[Any, ...]:
    """One message as a row of :data:`SCHEMA` (plain Python values: picklable)."""
    return row_from(fields_of(message))


def _delivery_mode(value: object) -> int:
    if value in (None, ""):
        return DeliveryMode.PERSISTENT
    if isinstance(value, int):
        return DeliveryMode(value)
    name = str(value).upper().replace("-", "_")
    if name in ("PERSISTENT", "NON_PERSISTENT"):
        return DeliveryMode[name]
    raise ValueError(f"delivery_mode {value!r} must be PERSISTENT or NON_PERSISTENT (2 or 1)")


def _destination(text: str) -> Destination:
    kind, sep, name = text.partition("://")
    if not sep or kind.lower() not in ("queue", "topic") or not name:
        raise ValueError(f"reply_to {text!r} must say its kind: 'queue://NAME' or "
                         "'topic://NAME'")
    return Queue(name) if kind.lower() == "queue" else Topic(name)


def to_message(session: Session, row: Mapping[str, Any]) -> tuple[Message, dict[str, Any]]:
    """A message made from a row's columns (see the module docstring), and the send
    options (delivery_mode, priority, time_to_live) to pass to ``producer.send``."""
    body = row.get("text", row.get("body"))
    data = row.get("bytes")
    message: Message
    if isinstance(body, bytes | bytearray):
        message = session.create_bytes_message(bytes(body))
    elif data is not None:
        message = session.create_bytes_message(bytes(data))
    else:
        message = session.create_text_message(None if body is None else str(body))
    for key, value in (row.get("properties") or {}).items():
        message.set_property(str(key), value)
    for key, struct in (row.get("typed_properties") or {}).items():
        message.set_property(str(key), _untyped(str(key), struct))
    if row.get("correlation_id") is not None:
        message.correlation_id = str(row["correlation_id"])
    if row.get("type") is not None:
        message.jms_type = str(row["type"])
    if row.get("reply_to"):
        message.reply_to = _destination(str(row["reply_to"]))
    send: dict[str, Any] = {"delivery_mode": _delivery_mode(row.get("delivery_mode"))}
    if row.get("priority") is not None:
        send["priority"] = int(row["priority"])
    if row.get("time_to_live") is not None:
        send["time_to_live"] = int(row["time_to_live"]) / 1000.0  # ms in the row, s here
    return message, send
