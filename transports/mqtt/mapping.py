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
user properties (the headers together in ``jmspy-h``, JMSType in ``jmspy-type``, each
property under its own name), plus the native correlation data, response topic, content
type and message expiry interval.
MQTT 3.1.1 carries only the payload: :func:`check_v311` refuses, rather than drops, a
message that has anything else, and receivers get the payload back as a TextMessage when
it is valid UTF-8 (a BytesMessage otherwise), because 3.1.1 has no content type.
"""

from __future__ import annotations

import itertools
import json
import math
import struct
import time
import uuid
from typing import Any, Final

from jmspy.capabilities import Feature
from jmspy.destinations import Destination, Queue, Topic
from jmspy.errors import InvalidDestinationException, MessageFormatException
from jmspy.message import (
    BytesMessage,
    MapMessage,
    Message,
    PropertyValue,
    TextMessage,
    finish_received,
)
from jmspy.property_codes import TYPE_CODES, typed

__all__ = [
    "SHARE_GROUP",
    "PublishProperties",
    "check_v311",
    "filters_overlap",
    "from_publish",
    "jms_name",
    "mqtt_filter",
    "mqtt_topic",
    "to_publish_v5",
    "topic_of",
    "unsupported_in_message",
]

#: The shared-subscription group every jmspy Queue consumer joins.
SHARE_GROUP: Final = "jmspy"
_HEADER_PREFIX: Final = "jmspy-"
#: The JMS headers travel in one user property, ``jmspy-h`` =
#: ``1;<timestamp>;<body kind>;<expiration>;<reply-to kind>;<property types>;<message id>``
#: (the id last: it is the only field that may hold ';'). One property instead of one per
#: header, because paho parses each received property at a cost that dominated the
#: receive profile. The name has a '-', so no JMS property can collide with it.
_HEADER_NAME: Final = "jmspy-h"
_HEADER_VERSION: Final = "1"
#: Ids for messages from non-JMS publishers: unique per process without os.urandom per
#: message (uuid4 showed in the receive profile).
_ID_PREFIX: Final = uuid.uuid4().hex
_ids = itertools.count(1)
_U16: Final = struct.Struct("!H").pack
_U32: Final = struct.Struct("!L").pack
_HEADER_KEY: Final = _U16(len(_HEADER_NAME)) + _HEADER_NAME.encode()


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


_published_on: dict[str, str] = {}


def mqtt_topic(destination: Destination) -> str:
    """The MQTT topic a message sent to ``destination`` is published on (remembered per
    name, up to 512: a producer sends to few names, and splitting each one per message
    showed in the send profile)."""
    name = destination.name
    topic = _published_on.get(name)
    if topic is None:
        topic = _words(name, wildcards=False)
        if len(_published_on) >= 512:
            _published_on.clear()
        _published_on[name] = topic
    return topic


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


_topics: dict[str, Topic] = {}


def topic_of(mqtt_topic_name: str) -> Topic:
    """The JMS Topic a PUBLISH arrived on (wildcard subscribers see each message's own).

    Topics are immutable, so one object serves every message on a topic (building one
    per message showed in the receive profile); up to 512 are kept, then it starts over.
    """
    topic = _topics.get(mqtt_topic_name)
    if topic is None:
        if len(_topics) >= 512:
            _topics.clear()
        topic = _topics[mqtt_topic_name] = Topic(jms_name(mqtt_topic_name))
    return topic


# -- what MQTT cannot carry ------------------------------------------------------------------
def unsupported_in_message(message: Message) -> tuple[Feature, str] | None:
    """(feature, what exactly) for what the message asks of MQTT beyond a payload and
    QoS that the capability matrix must allow (priority, delivery delay), or None."""
    if message.priority != 4:
        return Feature.PRIORITY, f"message priority {message.priority}"
    destination = message.destination
    if destination is not None and destination.options:
        return Feature.DESTINATION_OPTIONS, options_detail(destination)
    if message.delivery_time > message.timestamp:
        return Feature.DELIVERY_DELAY, "delivery delay"
    return None


def options_detail(destination: Destination) -> str:
    """How a refusal of ``destination``'s options names them."""
    return f"destination options of {destination} ({', '.join(destination.options)})"


def check_v311(message: Message) -> tuple[Feature, str] | None:
    """What a 3.1.1 PUBLISH cannot carry in this message, or None when only a payload:
    (Feature.TIME_TO_LIVE, ...) when a time to live is all, else (Feature.HEADERS, ...)."""
    lost = []
    if message._properties:
        lost.append(f"properties {sorted(message._properties)}")
    if message.correlation_id is not None:
        lost.append("JMSCorrelationID")
    if message.reply_to is not None:
        lost.append("JMSReplyTo")
    if message.jms_type is not None:
        lost.append("JMSType")
    if isinstance(message, MapMessage):
        lost.append("a MapMessage body (no content type to say it is a map)")
    if message.expiration:
        lost.append("a time to live")
        if len(lost) == 1:
            return Feature.TIME_TO_LIVE, "sending a time to live"
    if not lost:
        return None
    return Feature.HEADERS, "sending " + ", ".join(lost)


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


class PublishProperties:
    """A PUBLISH packet's MQTT 5 properties, already encoded.

    paho's ``publish()`` only calls ``pack()`` on the properties it is given. paho's own
    ``Properties`` looks every attribute up by name through lists rebuilt on each access
    (about 20 µs per attribute set, 0.1 ms per message with jmspy's headers), which halved
    the throughput of a synchronous send; encoding here costs a few µs and produces the
    same bytes, in the same order (tests/test_mqtt_mapping.py compares the two).
    """

    __slots__ = ("packed",)

    def __init__(self, packed: bytes) -> None:
        self.packed = packed

    def pack(self) -> bytes:
        return self.packed

    def __repr__(self) -> str:  # what paho's debug log prints
        return f"PublishProperties({self.packed!r})"


def _utf8(value: str, what: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > 0xFFFF:
        raise MessageFormatException(
            f"{what} is {len(data)} bytes in UTF-8; an MQTT string holds at most 65535: "
            "shorten it (or carry the data in the message body)"
        )
    return _U16(len(data)) + data


def _vbi(n: int) -> bytes:
    """MQTT Variable Byte Integer."""
    out = bytearray()
    while True:
        digit, n = n & 0x7F, n >> 7
        out.append(digit | 0x80 if n else digit)
        if not n:
            return bytes(out)


def to_publish_v5(message: Message) -> tuple[bytes, PublishProperties]:
    """(payload, PUBLISH properties) carrying the JMS headers and properties.

    Encoded in paho's order (by property identifier): message expiry, content type,
    response topic, correlation data, then the user properties. No Payload Format
    Indicator: the content type (``text/plain;charset=utf-8``) already tells MQTT clients
    a payload is UTF-8 text, and paho's parser spends on each received property a quarter
    to a half of what it spends on a whole PUBLISH without properties (callgrind, paho
    2.2: the indicator alone cost a consumer 68k of 830k instructions per message).
    """
    assert message.message_id is not None
    payload, kind, ctype = payload_of(message)
    parts: list[bytes] = []
    if message.expiration:
        remaining = (message.expiration - int(time.time() * 1000)) / 1000.0
        parts.append(b"\x02" + _U32(min(0xFFFFFFFF, max(1, math.ceil(remaining)))))
    if ctype:
        parts.append(b"\x03" + _utf8(ctype, "the content type"))
    reply_kind = ""
    if message.reply_to is not None:
        parts.append(b"\x08" + _utf8(mqtt_topic(message.reply_to), "JMSReplyTo"))
        reply_kind = message.reply_to.kind
    if message.correlation_id is not None:
        corr = message.correlation_id.encode("utf-8")
        if len(corr) > 0xFFFF:
            raise MessageFormatException(
                f"JMSCorrelationID is {len(corr)} bytes; MQTT correlation data holds at "
                "most 65535"
            )
        parts.append(b"\x09" + _U16(len(corr)) + corr)
    user: list[tuple[str, str]] = []
    if message.jms_type is not None:
        user.append(("jmspy-type", message.jms_type))
    types: list[str] = []
    props = message._properties
    if props:
        for name, value in props.items():
            if value is None:
                continue
            code = TYPE_CODES.get(type(value))
            if code is not None:
                types.append(f"{name}={code}")
            user.append((name, str(value).lower() if isinstance(value, bool) else str(value)))
    exp = str(message.expiration) if message.expiration else ""
    header = (
        f"{_HEADER_VERSION};{message.timestamp};{kind};{exp};{reply_kind};{','.join(types)};"
        f"{message.message_id}"
    )
    parts.append(b"\x26" + _HEADER_KEY + _utf8(header, "JMSMessageID"))
    for key, value in user:
        parts.append(b"\x26" + _utf8(key, f"property name {key!r}")
                     + _utf8(value, f"the value of {key!r}"))
    body = b"".join(parts)
    return payload, PublishProperties(_vbi(len(body)) + body)


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
    pairs = getattr(properties, "UserProperty", None) if properties is not None else None
    user: dict[str, str] = dict(pairs) if pairs else {}
    header = user.get(_HEADER_NAME)
    fields = header.split(";", 6) if header is not None else ()
    if len(fields) == 7 and fields[0] == _HEADER_VERSION:
        _, ts, kind_or_empty, exp, reply_kind, ptypes, message_id = fields
        kind: str | None = kind_or_empty or None
    else:  # not from jmspy, or from one that sent each header as its own property
        ts, exp = user.get("jmspy-ts", ""), user.get("jmspy-exp", "")
        reply_kind, ptypes = user.get("jmspy-reply-kind", ""), user.get("jmspy-ptypes", "")
        message_id, kind = user.get("jmspy-id", ""), user.get("jmspy-body")
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
        msg._body = payload.decode("utf-8", errors="replace") if kind == "text" else None
    elif kind == "map":
        msg = MapMessage.__new__(MapMessage)
        decoded: dict[str, Any] = json.loads(payload.decode("utf-8") or "{}")
        msg._body = {
            k: bytes.fromhex(v["hex"]) if isinstance(v, dict) else v for k, v in decoded.items()
        }
    elif kind == "none":
        msg = Message.__new__(Message)
        msg._body = None
    else:
        msg = BytesMessage.__new__(BytesMessage)
        msg._body = bytes(payload)
        msg._pos = 0
    codes = dict(item.split("=", 1) for item in ptypes.split(",") if "=" in item)
    props: dict[str, PropertyValue] = {}
    for name, value in user.items():
        if name.startswith(_HEADER_PREFIX):
            continue
        try:
            props[name] = typed(value, codes.get(name))
        except ValueError:
            props[name] = value
    now = int(time.time() * 1000)
    msg.message_id = message_id or f"ID:mqtt-{_ID_PREFIX}-{next(_ids)}"
    msg.timestamp = _int(ts, now)
    corr = getattr(properties, "CorrelationData", None) if properties is not None else None
    msg.correlation_id = corr.decode("utf-8", "replace") if corr is not None else None
    reply = getattr(properties, "ResponseTopic", None) if properties is not None else None
    if reply:
        klass = Queue if reply_kind == "queue" else Topic
        msg.reply_to = klass(jms_name(reply))
    else:
        msg.reply_to = None
    msg.destination = destination
    msg.delivery_mode = 2 if qos > 0 else 1
    msg.expiration = _int(exp)
    msg.priority = 4
    msg.jms_type = user.get("jmspy-type")
    msg.delivery_time = msg.timestamp
    return finish_received(msg, props)
