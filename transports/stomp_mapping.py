"""What the ``stomp://`` transport knows about each broker, and JMS messages <-> STOMP frames.

No I/O here: :func:`detect_broker` reads the CONNECTED frame's ``server`` header and
returns a :class:`BrokerProfile` saying how that broker carries each feature (the table in
docs/transports.md is written from these profiles); :func:`to_frame` and
:func:`from_frame` convert messages.

Why jmspy adds ``jmspy-*`` headers: STOMP headers are untyped strings and brokers assign
their own ``message-id`` (ActiveMQ) or reuse it as the ack id (RabbitMQ), so a JMS
message's id, timestamp, body kind and property types would not survive the trip. The
extra headers restore them for jmspy receivers; other clients just see extra string
properties. Property *values* still travel as strings, which matters for server-side
selectors: ActiveMQ compares ``qty > 10`` against the string ``"12"`` and finds no match
unless the broker runs with ``-Dorg.apache.activemq.filter.ComparisonExpression.
CONVERT_STRING_EXPRESSIONS=true`` (see docs/transports.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from jmspy.destinations import Destination, Queue, TemporaryQueue, Topic
from jmspy.message import (
    BytesMessage,
    MapMessage,
    Message,
    PropertyValue,
    TextMessage,
    finish_received,
)

__all__ = [
    "BrokerProfile",
    "capability_matrix",
    "detect_broker",
    "from_frame",
    "stomp_destination",
    "to_frame",
]


@dataclass(frozen=True, slots=True)
class BrokerProfile:
    """How one broker family carries jmspy's features over STOMP.

    ``window``: the SUBSCRIBE header carrying the consumer window ("" = none).
    ``cancel``: how unacknowledged messages go back for redelivery: "nack" (RabbitMQ
    requeues at the original position; jmspy's broker puts them back at the head) or
    "resubscribe" (ActiveMQ 5 turns a NACK into a poison ack and dead-letters the message,
    so the transport re-subscribes instead: the broker then redelivers every unacked
    message of the subscription, in order, marked ``redelivered:true``).
    ``nack_order``: "asc" sends NACKs oldest first, "desc" newest first (a broker that
    pushes each cancelled message to the head needs the newest first).
    """

    family: str
    server: str
    window: str
    window_in_bytes: bool
    server_selectors: bool
    cancel: str
    nack_order: str
    browse: bool
    delay_header: str
    ttl_header: str  # "expires" (absolute ms) or "expiration" (relative ms, RabbitMQ)
    durable: bool
    temporary_queues: bool
    stats: bool


_PROFILES: Final = {
    "jmspy": BrokerProfile(
        "jmspy", "", "jmspy-flow-limit", False, True, "nack", "asc", False,
        "jmspy-delivery-delay", "expires", True, True, True,
    ),
    "artemis": BrokerProfile(
        "Artemis", "", "consumer-window-size", True, True, "nack", "asc", False,
        "AMQ_SCHEDULED_DELAY", "expires", True, True, False,
    ),
    "activemq": BrokerProfile(
        "ActiveMQ", "", "activemq.prefetchSize", False, True, "resubscribe", "asc", True,
        "AMQ_SCHEDULED_DELAY", "expires", True, True, False,
    ),
    "rabbitmq": BrokerProfile(
        "RabbitMQ", "", "prefetch-count", False, False, "nack", "asc", False,
        "", "expiration", True, True, False,
    ),
    "unknown": BrokerProfile(
        "unknown", "", "", False, True, "nack", "asc", False, "", "expires",
        False, False, False,
    ),
}


def detect_broker(server: str | None) -> BrokerProfile:
    """The profile for a CONNECTED ``server`` header ("ActiveMQ/5.17.2", "RabbitMQ/3.10.8",
    "ActiveMQ-Artemis/2.x", "jmspy-broker_ref/0.1"); unknown servers get the plain-STOMP
    profile (no window header, server-side selectors assumed)."""
    text = (server or "").strip()
    low = text.lower()
    if low.startswith("jmspy"):
        key = "jmspy"
    elif low.startswith("activemq-artemis") or "artemis" in low:
        key = "artemis"
    elif low.startswith("activemq"):
        key = "activemq"
    elif low.startswith("rabbitmq"):
        key = "rabbitmq"
    else:
        key = "unknown"
    base = _PROFILES[key]
    return BrokerProfile(**{**{f: getattr(base, f) for f in base.__slots__}, "server": text})


# -- destinations ------------------------------------------------------------------------
def stomp_destination(dest: Destination) -> str:
    """ActiveMQ/RabbitMQ naming: ``/queue/NAME``, ``/topic/NAME``, ``/temp-queue/NAME``."""
    if isinstance(dest, TemporaryQueue):
        name = dest.name
        return name if name.startswith("/") else f"/temp-queue/{name}"
    if isinstance(dest, Topic):
        return f"/topic/{dest.name}"
    return f"/queue/{dest.name}"


def parse_destination(text: str | None) -> Destination | None:
    if not text:
        return None
    for prefix, kind in (("/queue/", Queue), ("/topic/", Topic), ("/amq/queue/", Queue)):
        if text.startswith(prefix):
            return kind(text[len(prefix):])
    if text.startswith(("/temp-queue/", "/remote-temp-queue/", "/reply-queue/")):
        return TemporaryQueue(text)
    return Queue(text)


# -- messages ----------------------------------------------------------------------------
#: Headers that are protocol or JMS header fields, never application properties.
_RESERVED: Final = frozenset(
    {
        "destination", "content-type", "content-length", "receipt", "transaction",
        "persistent", "priority", "expires", "expiration", "correlation-id", "reply-to",
        "type", "message-id", "timestamp", "subscription", "ack", "redelivered",
        "AMQ_SCHEDULED_DELAY", "delivery-mode", "original-destination", "x-queue-name",
        "x-exchange", "x-routing-key",
    }
)
_TYPE_CODES: Final = {bool: "b", int: "i", float: "f"}


def to_frame(message: Message, profile: BrokerProfile) -> tuple[str, bytes, dict[str, str]]:
    """(destination, body, headers) for a SEND. Raises ValueError for what the broker
    cannot carry (the caller turns it into UnsupportedFeatureException)."""
    assert message.destination is not None and message.message_id is not None
    headers: dict[str, str] = {
        "persistent": "true" if message.delivery_mode == 2 else "false",
        "priority": str(message.priority),
        "jmspy-message-id": message.message_id,
        "jmspy-timestamp": str(message.timestamp),
    }
    if message.expiration:
        if profile.ttl_header == "expiration":
            headers["expiration"] = str(max(1, message.expiration - message.timestamp))
        else:
            headers["expires"] = str(message.expiration)
    delay = message.delivery_time - message.timestamp if message.delivery_time else 0
    if delay > 0:
        if not profile.delay_header:
            raise ValueError("delivery delay")
        headers[profile.delay_header] = str(delay)
    if message.correlation_id is not None:
        headers["correlation-id"] = message.correlation_id
    if message.reply_to is not None:
        headers["reply-to"] = stomp_destination(message.reply_to)
    if message.jms_type is not None:
        headers["type"] = message.jms_type
    types: list[str] = []
    for name, value in message._properties.items():
        if value is None:
            continue
        code = _TYPE_CODES.get(type(value))
        if code is not None:
            types.append(f"{name}={code}")
        headers[name] = str(value).lower() if isinstance(value, bool) else str(value)
    if types:
        headers["jmspy-ptypes"] = ",".join(types)
    body: bytes
    if isinstance(message, TextMessage):
        body = (message.text or "").encode("utf-8")
        headers["content-type"] = "text/plain;charset=utf-8"
        headers["jmspy-body"] = "text" if message.text is not None else "null-text"
    elif isinstance(message, BytesMessage):
        body = message.body
        headers["content-type"] = "application/octet-stream"
        headers["jmspy-body"] = "bytes"
    elif isinstance(message, MapMessage):
        body = json.dumps(
            {k: {"b64": v.hex()} if isinstance(v, bytes) else v for k, v in message.map.items()}
        ).encode("utf-8")
        headers["content-type"] = "application/json"
        headers["jmspy-body"] = "map"
    else:
        body = b""
        headers["jmspy-body"] = "none"
    return stomp_destination(message.destination), body, headers


def _typed(raw: str, code: str | None) -> PropertyValue:
    if code == "i":
        return int(raw)
    if code == "f":
        return float(raw)
    if code == "b":
        return raw.lower() == "true"
    return raw


def from_frame(headers: dict[str, str], body: bytes | str) -> Message:
    """A read-only client Message from a MESSAGE frame (delivery count set by the caller)."""
    raw = body.encode("utf-8") if isinstance(body, str) else (body or b"")
    kind = headers.get("jmspy-body")
    if kind is None:
        ctype = headers.get("content-type", "")
        if ctype.startswith("text/") or (not ctype and "content-length" not in headers):
            kind = "text"
        else:
            kind = "bytes"
    msg: Message
    if kind == "text" or kind == "null-text":
        msg = TextMessage.__new__(TextMessage)
        msg._text = raw.decode("utf-8", errors="replace") if kind == "text" else None
    elif kind == "bytes":
        msg = BytesMessage.__new__(BytesMessage)
        msg._data = raw
        msg._pos = 0
    elif kind == "map":
        msg = MapMessage.__new__(MapMessage)
        decoded: dict[str, Any] = json.loads(raw.decode("utf-8") or "{}")
        msg._map = {
            k: bytes.fromhex(v["b64"]) if isinstance(v, dict) else v for k, v in decoded.items()
        }
    else:
        msg = Message.__new__(Message)
    codes = dict(
        item.split("=", 1) for item in headers.get("jmspy-ptypes", "").split(",") if "=" in item
    )
    props: dict[str, PropertyValue] = {}
    for name, value in headers.items():
        if name in _RESERVED or name.startswith("jmspy-"):
            continue
        try:
            props[name] = _typed(value, codes.get(name))
        except ValueError:
            props[name] = value
    msg.message_id = headers.get("jmspy-message-id") or headers.get("message-id")
    msg.timestamp = _int(headers.get("jmspy-timestamp") or headers.get("timestamp"))
    msg.correlation_id = headers.get("correlation-id")
    msg.reply_to = parse_destination(headers.get("reply-to"))
    msg.destination = parse_destination(headers.get("destination"))
    msg.delivery_mode = 2 if headers.get("persistent", "").lower() == "true" else 1
    msg.expiration = _int(headers.get("expires"))
    msg.priority = _int(headers.get("priority"), 4)
    msg.jms_type = headers.get("type")
    msg.delivery_time = msg.timestamp
    return finish_received(msg, props)


def _int(text: str | None, default: int = 0) -> int:
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        return default


# -- the capability table in docs/transports.md (tests/interop checks it is current) ------
_FAMILIES: Final = ("jmspy", "activemq", "artemis", "rabbitmq")


def _cells(p: BrokerProfile) -> dict[str, str]:
    if p.family == "jmspy":
        window = "native (`jmspy-flow-limit` / `jmspy-flow-threshold`)"
    elif p.window_in_bytes:
        window = f"emulated (`{p.window}` = limit x 1 KiB; count enforced by the client)"
    else:
        window = f"native window (`{p.window}`); threshold emulated"
    return {
        "consumer window + threshold": window,
        "connection flow limit": "emulated (client stash)",
        "selectors": (
            "native (`selector`)" if p.server_selectors
            else "emulated on topics; refused on queues unless `?rabbitmq_queue_selectors=discard`"
        ),
        "transactions": "native (BEGIN/COMMIT/ABORT)",
        "recover / rollback redelivery": (
            "native (NACK)" if p.cancel == "nack" else "emulated (re-SUBSCRIBE; NACK dead-letters)"
        ),
        "JMSXDeliveryCount": (
            "native (`jmspy-delivery-count`)" if p.family == "jmspy"
            else "emulated (`redelivered` + client memory)"
        ),
        "queue browser": "native (`browser:true`)" if p.browse else "refused",
        "delivery delay": f"native (`{p.delay_header}`)" if p.delay_header else "refused",
        "durable subscriptions": "native" if p.durable else "refused",
        "shared subscriptions": "refused",
        "temporary queues": "native (`/temp-queue/`)" if p.temporary_queues else "refused",
        "destination stats": "native (`/jmspy/stats`)" if p.stats else "refused",
    }


def capability_matrix() -> str:
    """The feature x broker table for STOMP, as Markdown (docs/transports.md embeds it)."""
    profiles = [_PROFILES[f] for f in _FAMILIES]
    cells = [_cells(p) for p in profiles]
    names = {"jmspy": "jmspy broker", "ActiveMQ": "ActiveMQ 5", "Artemis": "Artemis",
             "RabbitMQ": "RabbitMQ"}
    lines = [
        "| feature | " + " | ".join(names[p.family] for p in profiles) + " |",
        "| --- |" + " --- |" * len(profiles),
    ]
    for feature in cells[0]:
        lines.append(f"| {feature} | " + " | ".join(c[feature] for c in cells) + " |")
    return "\n".join(lines) + "\n"
