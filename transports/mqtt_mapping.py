"""JMS destinations and messages <-> MQTT topics and PUBLISH packets (no I/O here).

Topics. JMS names separate words with ``.``, MQTT with ``/``; the mapping is the obvious
one so that MQTT-native publishers and subscribers see natural topic names::

    prices.eu        <->  prices/eu
    prices.*         ->   prices/+        (one word)
    prices.#         ->   prices/#        (the rest; '>' is accepted as a synonym)

A ``/`` already in a JMS name passes through unchanged, so ``a.b`` and ``a/b`` are the
same MQTT topic. A Queue publishes to the topic of its name and is consumed through the
MQTT 5 shared subscription ``$share/jmspy/<topic>`` (competing consumers), which is why a
Queue and a Topic of the same name share one MQTT topic.

Messages. MQTT 5 carries what JMS needs: the JMS headers and typed properties travel as
user properties (``jmspy-*`` for headers, the property's own name for properties), plus
the native correlation data, response topic, content type and message expiry interval.
MQTT 3.1.1 carries only the payload: :func:`check_v311` refuses, rather than drops, a
message that has anything else, and receivers get the payload back as a TextMessage when
it is valid UTF-8 (a BytesMessage otherwise), because 3.1.1 has no content type.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any, Final

from jmspy.destinations import Destination, Queue, Topic
from jmspy.errors import InvalidDestinationException
from jmspy.message import (
    BytesMessage,
    MapMessage,
    Message,
    PropertyValue,
    TextMessage,
    finish_received,
)

__all__ = [
    "SHARE_GROUP",
    "check_v311",
    "filters_overlap",
    "from_publish",
    "jms_name",
    "mqtt_filter",
    "mqtt_topic",
    "to_publish_v5",
    "unsupported_in_message",
]

#: The shared-subscription group every jmspy Queue consumer joins.
SHARE_GROUP: Final = "jmspy"
_TYPE_CODES: Final = {bool: "b", int: "i", float: "f"}
_HEADER_PREFIX: Final = "jmspy-"


# -- topics --------------------------------------------------------------------------------
def _words(name: str, *, wildcards: bool) -> str:
    parts = name.split(".")
    out: list[str] = []
    for i, word in enumerate(parts):
        if word == "*" and wildcards:
            out.append("+")
        elif word in ("#", ">") and wildcards:
            if i != len(parts) - 1:
                raise InvalidDestinationException(
                    f"{name!r}: '{word}' (the rest of the name) must be the last word"
                )
            out.append("#")
        elif word in ("*", "#", ">") or "+" in word or "#" in word:
            raise InvalidDestinationException(
                f"{name!r}: {word!r} is a wildcard, or has '+'/'#' inside a word; MQTT "
                "wildcards are whole words ('a.*.c', 'a.#') and only consumers may use them"
            )
        else:
            out.append(word)
    return "/".join(out)


def mqtt_topic(destination: Destination) -> str:
    """The MQTT topic a message sent to ``destination`` is published on."""
    return _words(destination.name, wildcards=False)


def mqtt_filter(destination: Destination, share: str | None = None) -> str:
    """The MQTT topic filter a consumer of ``destination`` subscribes to."""
    topic = _words(destination.name, wildcards=True)
    if share is None and isinstance(destination, Queue):
        share = SHARE_GROUP
    return f"$share/{share}/{topic}" if share is not None else topic


def strip_share(topic_filter: str) -> str:
    """``$share/group/a/b`` -> ``a/b`` (the part a PUBLISH topic is matched against)."""
    if topic_filter.startswith("$share/"):
        return topic_filter.split("/", 2)[2]
    return topic_filter


def filters_overlap(a: str, b: str) -> bool:
    """Whether some topic matches both filters (share prefixes ignored)."""
    la, lb = strip_share(a).split("/"), strip_share(b).split("/")
    for x, y in zip(la, lb, strict=False):
        if x == "#" or y == "#":
            return True
        if x != y and x != "+" and y != "+":
            return False
    return len(la) == len(lb) or "#" in (la[len(lb) :] + lb[len(la) :])[:1]


def jms_name(topic: str) -> str:
    return topic.replace("/", ".")


# -- what MQTT cannot carry ------------------------------------------------------------------
def unsupported_in_message(message: Message) -> str | None:
    """What no MQTT version carries (priority, delivery delay), or None."""
    if message.priority != 4:
        return (
            f"message priority {message.priority} (MQTT delivers in order, it has no "
            "priorities; send with the default priority 4)"
        )
    if message.delivery_time > message.timestamp:
        return "delivery delay (MQTT brokers have no scheduled delivery)"
    return None


def check_v311(message: Message) -> str | None:
    """What a 3.1.1 PUBLISH cannot carry in this message, or None when only a payload."""
    lost = []
    if message._properties:
        lost.append(f"properties {sorted(message._properties)}")
    if message.correlation_id is not None:
        lost.append("JMSCorrelationID")
    if message.reply_to is not None:
        lost.append("JMSReplyTo")
    if message.jms_type is not None:
        lost.append("JMSType")
    if message.expiration:
        lost.append("a time to live")
    if isinstance(message, MapMessage):
        lost.append("a MapMessage body (no content type to say it is a map)")
    if not lost:
        return None
    return ", ".join(lost) + " (MQTT 3.1.1 carries only the payload)"


# -- messages --------------------------------------------------------------------------------
def payload_of(message: Message) -> tuple[bytes, str, str]:
    """(payload, jmspy body kind, content type)."""
    if isinstance(message, TextMessage):
        text = message.text
        return (
            (text or "").encode("utf-8"),
            "text" if text is not None else "null-text",
            "text/plain;charset=utf-8",
        )
    if isinstance(message, BytesMessage):
        return message.body, "bytes", "application/octet-stream"
    if isinstance(message, MapMessage):
        body = json.dumps(
            {k: {"hex": v.hex()} if isinstance(v, bytes) else v for k, v in message.map.items()}
        ).encode("utf-8")
        return body, "map", "application/json"
    return b"", "none", ""


def to_publish_v5(message: Message, properties: Any) -> bytes:
    """Fill a paho PUBLISH ``Properties`` from the JMS headers; returns the payload."""
    assert message.message_id is not None
    payload, kind, ctype = payload_of(message)
    user: list[tuple[str, str]] = [
        ("jmspy-id", message.message_id),
        ("jmspy-ts", str(message.timestamp)),
        ("jmspy-body", kind),
    ]
    if ctype:
        properties.ContentType = ctype
    if kind == "text":
        properties.PayloadFormatIndicator = 1
    if message.correlation_id is not None:
        properties.CorrelationData = message.correlation_id.encode("utf-8")
    if message.reply_to is not None:
        properties.ResponseTopic = mqtt_topic(message.reply_to)
        user.append(("jmspy-reply-kind", message.reply_to.kind))
    if message.jms_type is not None:
        user.append(("jmspy-type", message.jms_type))
    if message.expiration:
        remaining = (message.expiration - int(time.time() * 1000)) / 1000.0
        properties.MessageExpiryInterval = max(1, math.ceil(remaining))
        user.append(("jmspy-exp", str(message.expiration)))
    types: list[str] = []
    for name, value in message._properties.items():
        if value is None:
            continue
        code = _TYPE_CODES.get(type(value))
        if code is not None:
            types.append(f"{name}={code}")
        user.append((name, str(value).lower() if isinstance(value, bool) else str(value)))
    if types:
        user.append(("jmspy-ptypes", ",".join(types)))
    properties.UserProperty = user
    return payload


def _typed(raw: str, code: str | None) -> PropertyValue:
    if code == "i":
        return int(raw)
    if code == "f":
        return float(raw)
    if code == "b":
        return raw.lower() == "true"
    return raw


def _int(text: str | None, default: int = 0) -> int:
    try:
        return int(text) if text else default
    except ValueError:
        return default


def from_publish(
    topic: str, payload: bytes, qos: int, properties: Any, destination: Destination
) -> Message:
    """A read-only Message from a PUBLISH. ``destination`` is the consumer's view: its
    Queue, or the Topic the message was actually published on (wildcard consumers)."""
    user: dict[str, str] = {}
    if properties is not None:
        for key, value in getattr(properties, "UserProperty", None) or []:
            user[key] = value
    kind = user.get("jmspy-body")
    if kind is None:
        ctype = getattr(properties, "ContentType", "") if properties is not None else ""
        if ctype.startswith("text/"):
            kind = "text"
        elif ctype:
            kind = "bytes"
        else:
            try:
                payload.decode("utf-8")
                kind = "text"
            except UnicodeDecodeError:
                kind = "bytes"
    msg: Message
    if kind in ("text", "null-text"):
        msg = TextMessage.__new__(TextMessage)
        msg._text = payload.decode("utf-8", errors="replace") if kind == "text" else None
    elif kind == "map":
        msg = MapMessage.__new__(MapMessage)
        decoded: dict[str, Any] = json.loads(payload.decode("utf-8") or "{}")
        msg._map = {
            k: bytes.fromhex(v["hex"]) if isinstance(v, dict) else v for k, v in decoded.items()
        }
    elif kind == "none":
        msg = Message.__new__(Message)
    else:
        msg = BytesMessage.__new__(BytesMessage)
        msg._data = bytes(payload)
        msg._pos = 0
    codes = dict(
        item.split("=", 1) for item in user.get("jmspy-ptypes", "").split(",") if "=" in item
    )
    props: dict[str, PropertyValue] = {}
    for name, value in user.items():
        if name.startswith(_HEADER_PREFIX):
            continue
        try:
            props[name] = _typed(value, codes.get(name))
        except ValueError:
            props[name] = value
    now = int(time.time() * 1000)
    msg.message_id = user.get("jmspy-id") or f"ID:mqtt-{uuid.uuid4().hex}"
    msg.timestamp = _int(user.get("jmspy-ts"), now)
    corr = getattr(properties, "CorrelationData", None) if properties is not None else None
    msg.correlation_id = corr.decode("utf-8", "replace") if corr is not None else None
    reply = getattr(properties, "ResponseTopic", None) if properties is not None else None
    if reply:
        klass = Queue if user.get("jmspy-reply-kind") == "queue" else Topic
        msg.reply_to = klass(jms_name(reply))
    else:
        msg.reply_to = None
    msg.destination = destination
    msg.delivery_mode = 2 if qos > 0 else 1
    msg.expiration = _int(user.get("jmspy-exp"))
    msg.priority = 4
    msg.jms_type = user.get("jmspy-type")
    msg.delivery_time = msg.timestamp
    return finish_received(msg, props)
