"""STOMP headers <-> core :class:`ServerMessage`, and STOMP destination names.

Destination names (ActiveMQ's convention, which stomp.py users already know):

* ``/queue/NAME`` -> queue ``NAME``; ``/topic/NAME`` -> topic ``NAME``;
* a name with no known prefix is a queue of that exact name (ActiveMQ does the same);
* ``/temp-queue/NAME`` -> a temporary queue owned by this connection, created on first
  use and deleted when the connection closes; other connections see it (in ``reply-to``)
  as ``/remote-temp-queue/ID`` and may send to that.

Bodies: ``content-type: text/*`` (or no content-type *and* no content-length, as a
hand-typed frame has) makes a TEXT message (the body must be UTF-8); any other body is
BYTES. ActiveMQ draws the same line, so a JMS consumer sees what an ActiveMQ one would.

Header -> message: ``persistent`` ("true"; default false, as ActiveMQ), ``priority``
(0-9, default 4), ``expires`` (absolute ms since the epoch, 0 = never), ``AMQ_SCHEDULED_DELAY``
or ``jmspy-delivery-delay`` (ms from now), ``correlation-id``, ``reply-to``, ``type``; every
other header that is not part of the protocol becomes a string property -- except where
``jmspy-ptypes`` (``name=i|f|b,...``), or the types field of the ``jmspy-jms`` header
jmspy clients send (:mod:`jmspy.stomp_jms_header`), says a property is an int, a float or
a boolean: those are stored typed, so that server-side selectors compare
``pick = 1`` or ``qty > 10`` as numbers. A raw STOMP client that sends no
``jmspy-ptypes`` keeps string properties (``pick = '1'`` matches, ``pick = 1`` does not).
The header itself stays a property, so jmspy receivers restore the same types.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from jmspy import twins
from jmspy.errors import JMSException
from jmspy.stomp_frames import Frame, FrameError
from jmspy.stomp_jms_header import HEADER as JMS_HEADER
from jmspy.stomp_jms_header import ptypes_of
from jmspy.wire.headers import SEND_TIMEOUT_HEADER

from ...core import TEMP_PREFIX, BodyType, DestinationKind, ServerMessage

_codec = twins.stomp_codec

__all__ = [
    "REMOTE_TEMP",
    "SEND_TIMEOUT_HEADER",
    "STATS_DESTINATION",
    "STATS_REPLY_HEADER",
    "TEMP",
    "HeaderError",
    "Target",
    "carriable_headers",
    "header_int",
    "message_body",
    "message_headers",
    "parse_destination",
    "render_destination",
    "to_server_message",
]

QUEUE: Final = "/queue/"
TOPIC: Final = "/topic/"
TEMP: Final = "/temp-queue/"
REMOTE_TEMP: Final = "/remote-temp-queue/"
#: SEND here with a ``reply-to`` to get one MESSAGE whose body is JSON of all_stats().
STATS_DESTINATION: Final = "/jmspy/stats"
#: The stats MESSAGE's header naming, as the stats list does, the requester's own
#: temporary queue the answer went to, so ``jmspy stat`` can leave it out of its listing.
STATS_REPLY_HEADER: Final = "stats-reply-queue"

#: Headers that steer the protocol or the message header fields, never properties.
_RESERVED: Final = frozenset(
    {
        "destination", "content-type", "content-length", "receipt", "transaction",
        "persistent", "priority", "expires", "AMQ_SCHEDULED_DELAY", "jmspy-delivery-delay",
        "correlation-id", "reply-to", "type", "message-id", "timestamp", "subscription",
        "ack", "redelivered", "jmspy-delivery-count", SEND_TIMEOUT_HEADER,
    }
)


class HeaderError(JMSException, ValueError):
    """A header value the server cannot accept. ``str()`` is the ERROR frame's ``message``
    header (what is wrong, naming the header); ``detail``, its body, adds how to fix it."""

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail if detail is not None else message + "."


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed STOMP destination. ``temp`` is set for ``/temp-queue/NAME`` (``name`` is
    then the client's local name, not yet a core queue name)."""

    kind: DestinationKind
    name: str
    temp: bool = False


#: RabbitMQ's prefix for a queue by its own name: a queue here too.
AMQ_QUEUE: Final = "/amq/queue/"
#: The destination prefixes this broker accepts, for errors that list them.
PREFIXES: Final = (QUEUE, TOPIC, TEMP, REMOTE_TEMP, AMQ_QUEUE)
_FORMS = "/queue/NAME, /topic/NAME or /temp-queue/NAME"


def parse_destination(text: str | None) -> Target:
    """A STOMP destination: ``/queue/NAME``, ``/topic/NAME``, ``/temp-queue/NAME``,
    ``/remote-temp-queue/ID`` (a temporary queue of another connection, as rendered in
    ``reply-to``), or a bare ``NAME`` without a leading ``/`` (a queue, as ActiveMQ reads
    it). Anything else starting with ``/`` is an unknown prefix, refused with the list."""
    if text is None:
        raise HeaderError("missing destination header",
                          f"this frame needs a destination header: use {_FORMS}.")
    if text.startswith(QUEUE):
        kind, name = DestinationKind.QUEUE, text[len(QUEUE):]
    elif text.startswith(AMQ_QUEUE):
        kind, name = DestinationKind.QUEUE, text[len(AMQ_QUEUE):]
    elif text.startswith(TOPIC):
        kind, name = DestinationKind.TOPIC, text[len(TOPIC):]
    elif text.startswith(TEMP):
        name = text[len(TEMP):]
        if not name:
            raise HeaderError(f"empty temporary queue name in destination {text!r}",
                              f"name the temporary queue after the prefix: {TEMP}NAME.")
        return Target(DestinationKind.QUEUE, name, temp=True)
    elif text.startswith(REMOTE_TEMP):
        if len(text) == len(REMOTE_TEMP):
            raise HeaderError(f"empty destination name in {text!r}",
                              f"a destination needs a name after its prefix: use {_FORMS}.")
        return Target(DestinationKind.QUEUE, TEMP_PREFIX + text[len(REMOTE_TEMP):])
    elif text.startswith("/"):
        if text + "/" in PREFIXES:  # "/queue", "/topic": a known prefix, no name after it
            raise HeaderError(f"empty destination name in {text!r}",
                              f"a destination needs a name after its prefix: use {_FORMS}.")
        prefix = text[: text.find("/", 1) + 1] or text
        raise HeaderError(
            f"unknown destination prefix {prefix!r} in {text[:200]!r}",
            f"destination {text[:200]!r} starts with {prefix!r}, which this broker does not "
            f"know; valid prefixes are {', '.join(PREFIXES)} (a name without a leading '/' "
            "is a queue).")
    else:
        kind, name = DestinationKind.QUEUE, text
    if not name:
        raise HeaderError(f"empty destination name in {text!r}",
                          f"a destination needs a name after its prefix: use {_FORMS}.")
    if "\r" in name or "\n" in name or "\0" in name:
        raise HeaderError(f"control character in destination name {name[:200]!r}",
                          "a destination name must not contain CR, LF or NUL: no STOMP "
                          "1.0/1.1 subscriber could be told where its messages came from.")
    return Target(kind, name)


def render_destination(
    kind: DestinationKind, name: str, local_temps: Mapping[str, str] | None = None
) -> str:
    """Core destination -> STOMP text. ``local_temps`` maps this connection's core temp
    queue names back to the names its client chose."""
    if kind is DestinationKind.TOPIC:
        return TOPIC + name
    if name.startswith(TEMP_PREFIX):
        if local_temps is not None and name in local_temps:
            return TEMP + local_temps[name]
        return REMOTE_TEMP + name[len(TEMP_PREFIX):]
    return QUEUE + name


def header_int(name: str, raw: str, low: int, high: int) -> int:
    """``raw``, the value of header ``name``, as an integer in ``[low, high]``; otherwise a
    HeaderError naming the header and what it must be (the client gets it as an ERROR)."""
    try:
        value = int(raw)
    except ValueError:
        raise HeaderError(f"header {name}:{raw!r} must be an integer") from None
    if not low <= value <= high:
        raise HeaderError(f"header {name}:{raw} must be between {low} and {high}")
    return value


def _int(headers: dict[str, str], name: str, low: int, high: int, default: int) -> int:
    raw = headers.get(name)
    if raw is None or raw == "":
        return default
    return header_int(name, raw, low, high)


_MAX_MS: Final = 2**62


def to_server_message(
    headers: dict[str, str],
    body: bytes,
    target: Target,
    message_id: str,
    now: int,
    resolve_reply: Callable[[str], tuple[DestinationKind, str]],
) -> ServerMessage:
    """Build the core message of a SEND (``headers``: first occurrence of each name)."""
    ctype = headers.get("content-type")
    text: str | None = None
    if (ctype is None and "content-length" not in headers) or (
        ctype is not None and ctype.startswith("text/")
    ):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise HeaderError(
                "a text body (content-type text/*, or no content-type and no "
                "content-length) must be UTF-8; send binary bodies with content-length "
                "and a non-text content-type"
            ) from None
    # The optional numeric headers are parsed only when present: most SENDs carry none.
    delay = 0
    if "AMQ_SCHEDULED_DELAY" in headers or "jmspy-delivery-delay" in headers:
        delay = _int(headers, "AMQ_SCHEDULED_DELAY", 0, _MAX_MS, 0) or _int(
            headers, "jmspy-delivery-delay", 0, _MAX_MS, 0
        )
    priority = _int(headers, "priority", 0, 9, 4) if "priority" in headers else 4
    expiration = _int(headers, "expires", 0, _MAX_MS, 0) if "expires" in headers else 0
    persistent = headers.get("persistent")
    reply = headers.get("reply-to")
    props: dict[str, object] = {k: v for k, v in headers.items() if k not in _RESERVED}
    ptypes = headers.get("jmspy-ptypes")
    if ptypes:
        _restore_types(props, ptypes, "jmspy-ptypes")
    ptypes = ptypes_of(headers)
    if ptypes:
        _restore_types(props, ptypes, JMS_HEADER)
    if ctype is not None and text is None:
        props["content-type"] = ctype  # keep a binary body's declared type
    return ServerMessage(
        message_id=message_id,
        kind=target.kind,
        destination=target.name,
        body_type=BodyType.BYTES if text is None else BodyType.TEXT,
        body=body if text is None else text,
        properties=props,
        persistent=persistent is not None and persistent.lower() == "true",
        priority=priority,
        timestamp=now,
        expiration=expiration,
        deliver_at=now + delay if delay else 0,
        correlation_id=headers.get("correlation-id"),
        reply_to=resolve_reply(reply) if reply else None,
        jms_type=headers.get("type"),
        size=len(body) + 64,
    )


#: Property-type lists by their text, split once: a producer sends the same one with every
#: message (bounded: forgotten past 256 different texts).
_PTYPE_ITEMS: dict[str, tuple[tuple[str, str], ...]] = {}


def _ptype_items(ptypes: str) -> tuple[tuple[str, str], ...]:
    """``"a=i,b=f"`` as ``(("a", "i"), ("b", "f"))`` (items without ``=`` left out)."""
    items = _PTYPE_ITEMS.get(ptypes)
    if items is None:
        items = tuple((name, code) for name, sep, code in (
            item.partition("=") for item in ptypes.split(",")) if sep)
        if len(_PTYPE_ITEMS) >= 256:
            _PTYPE_ITEMS.clear()
        _PTYPE_ITEMS[ptypes] = items
    return items


def _restore_types(props: dict[str, object], ptypes: str, header: str) -> None:
    """Type the properties ``ptypes`` names (``name=i``, ``=f``, ``=b``), as ``header``
    (``jmspy-ptypes``, or the types field of ``jmspy-jms``) said."""
    for name, code in _ptype_items(ptypes):
        raw = props.get(name)
        if not isinstance(raw, str):
            continue  # a type for a property that is not there: nothing to restore
        try:
            if code == "i":
                props[name] = int(raw)
            elif code == "f":
                props[name] = float(raw)
            elif code == "b":
                if raw not in ("true", "false"):
                    raise ValueError(raw)
                props[name] = raw == "true"
        except ValueError:
            kind = {"i": "an integer", "f": "a float", "b": "true or false"}[code]
            raise HeaderError(
                f"header {header} says property {name} is {kind}, but it is {raw!r}: "
                f"send {name} as {kind}, or drop {name}={code} from {header}"
            ) from None


def _prop_text(value: object) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "" if value is None else str(value)


def message_body(message: ServerMessage) -> tuple[bytes, str | None]:
    """(body bytes, content-type or None) of a message leaving the broker."""
    body = message.body
    bt = message.body_type
    if bt is BodyType.TEXT:
        return (body or "").encode("utf-8") if isinstance(body, str) else b"", (
            "text/plain;charset=utf-8"
        )
    if bt is BodyType.BYTES:
        return (body if isinstance(body, bytes) else b""), None
    if bt is BodyType.MAP:
        return json.dumps(body, default=str).encode("utf-8"), "application/json"
    return b"", None


def message_headers(
    message: ServerMessage,
    destination: str,
    subscription: str,
    ack: str,
    delivery_count: int,
    reply_to: str | None,
) -> list[tuple[str, str]]:
    """Headers of a MESSAGE frame (without content-type/length).

    ``redelivered`` goes on every MESSAGE, ``false`` too, as RabbitMQ sends it: code
    written against RabbitMQ reads it unconditionally. ``persistent`` is sent only when
    true (as ActiveMQ 5 does) and ``jmspy-delivery-count`` only from the second delivery
    on: absent, each means what its default says, and every header costs every consumer a
    parse (stomp.py: ~3.5 us). ``priority``, ``timestamp`` and ``expires`` (0 = never)
    always go, like ActiveMQ's. ``ack`` is empty where no client uses an ack id (an
    ``ack:auto`` subscription; STOMP 1.0 and 1.1, which ACK by message-id): no ``ack``
    header then, as neither ActiveMQ 5 nor RabbitMQ sends one there (STOMP 1.2 requires it
    only for the client modes).
    """
    headers = [
        ("destination", destination),
        ("message-id", message.message_id),
        ("subscription", subscription),
    ]
    if ack:
        headers.append(("ack", ack))
    headers.append(("priority", str(message.priority)))
    headers.append(("timestamp", str(message.timestamp)))
    headers.append(("expires", str(message.expiration)))
    if delivery_count > 1:
        headers.append(("redelivered", "true"))
        headers.append(("jmspy-delivery-count", str(delivery_count)))
    else:
        headers.append(("redelivered", "false"))
    if message.persistent:
        headers.append(("persistent", "true"))
    if message.correlation_id is not None:
        headers.append(("correlation-id", message.correlation_id))
    if reply_to is not None:
        headers.append(("reply-to", reply_to))
    if message.jms_type is not None:
        headers.append(("type", message.jms_type))
    for key, value in message.properties.items():
        if key not in _RESERVED or key == "content-type":
            headers.append((key, _prop_text(value)))
    return headers


def carriable_headers(headers: list[tuple[str, str]], version: str) -> list[tuple[str, str]]:
    """The headers ``version`` can carry, each tried alone. STOMP 1.0 has no escaping, so a
    property (or correlation id) holding an EOL cannot travel in it; the message still
    goes, without that header, rather than not at all. (The rare path: only taken after
    the whole frame failed to encode.)"""
    encode = _codec.encode_frame
    out = []
    for header in headers:
        try:
            encode(Frame("MESSAGE", [header]), version)
        except FrameError:
            continue
        out.append(header)
    return out
