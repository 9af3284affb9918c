"""What the ``stomp://`` transport knows about each broker, and JMS messages <-> STOMP frames.

No I/O here: :func:`detect_broker` reads the CONNECTED frame's ``server`` header and
returns a :class:`BrokerProfile` saying how that broker carries each feature (the table in
docs/transports.md is written from these profiles); :func:`to_frame` and
``from_frame`` (:mod:`jmspy.transports.stomp.received`) convert messages.

Why jmspy adds a ``jmspy-jms`` header: STOMP headers are untyped strings and brokers assign
their own ``message-id`` (ActiveMQ) or reuse it as the ack id (RabbitMQ), so a JMS
message's id, timestamp, body kind and property types would not survive the trip. The
header (:mod:`jmspy.stomp_jms_header`) restores them for jmspy receivers; other clients
just see one extra string property. The separate ``jmspy-*`` headers of earlier versions
are still read. Property *values* still travel as strings, which matters for server-side
selectors: ActiveMQ compares ``qty > 10`` against the string ``"12"`` and finds no match
unless the broker runs with ``-Dorg.apache.activemq.filter.ComparisonExpression.
CONVERT_STRING_EXPRESSIONS=true`` (see docs/transports.md).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Final

from jmspy.capabilities import Cell, Feature, emulated, native, refused
from jmspy.destinations import Destination, Queue, TemporaryQueue, Topic
from jmspy.message import (
    BytesMessage,
    MapMessage,
    Message,
    TextMessage,
)
from jmspy.property_codes import TYPE_CODES
from jmspy.stomp_jms_header import HEADER as JMS_HEADER
from jmspy.stomp_jms_header import format_header, header_of

from .. import destination_options

__all__ = [
    "RESERVED_HEADERS",
    "STOMP_TARGETS",
    "TEMP_QUEUE_PREFIX",
    "BrokerProfile",
    "absolute_expiration",
    "detect_broker",
    "header_int",
    "jms_message_id",
    "profile_key",
    "stomp_cells",
    "stomp_destination",
    "subscribe_destination",
    "to_frame",
    "unfolded_message_id",
]


@dataclass(frozen=True, slots=True)
class BrokerProfile:
    """How one broker family carries jmspy's features over STOMP.

    ``window``: the SUBSCRIBE header carrying the consumer window ("" = none).
    ``cancel``: how unacknowledged messages go back for redelivery: "nack" (RabbitMQ
    requeues at the original position; jmspy's broker puts a batch back at the head, in
    order: ``nack_batches``) or
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
    #: How a durable subscription is named on SUBSCRIBE and deleted on UNSUBSCRIBE:
    #: ActiveMQ's header (Artemis and jmspy's broker accept it too), or RabbitMQ's
    #: ``durable:true`` + ``auto-delete:false`` ("durable"); "" = unknown.
    durable_header: str = ""
    no_local_header: str = ""
    #: The broker's word for "any number of words" in a topic subscription ("" = jmspy
    #: passes `#` / `>` through as written); `*` (one word) is the same everywhere.
    multi_wildcard: str = ""
    #: Prefix of the shared-subscription headers (``<prefix>-subscription``,
    #: ``<prefix>-durable-subscription``): only jmspy's broker has them ("" = refused).
    shared_header: str = ""
    #: NACKs of one hand-back go as a batch (``jmspy-nack-more`` on all but the last),
    #: which the broker returns in one step: only jmspy's broker reads the header.
    nack_batches: bool = False


_AMQ_NAME: Final = "activemq.subscriptionName"  # ActiveMQ 5; Artemis and jmspy accept it too
_AMQ_NO_LOCAL: Final = "activemq.noLocal"

_PROFILES: Final = {
    "jmspy": BrokerProfile(
        "jmspy", "", "jmspy-flow-limit", False, True, "nack", "asc", True,
        "jmspy-delivery-delay", "expires", True, True, True, _AMQ_NAME, _AMQ_NO_LOCAL,
        shared_header="jmspy-shared", nack_batches=True,
    ),
    "artemis": BrokerProfile(
        "Artemis", "", "consumer-window-size", True, True, "nack", "asc", False,
        "AMQ_SCHEDULED_DELAY", "expires", True, True, False, _AMQ_NAME, _AMQ_NO_LOCAL, "#",
    ),
    "activemq": BrokerProfile(
        "ActiveMQ", "", "activemq.prefetchSize", False, True, "resubscribe", "asc", True,
        "AMQ_SCHEDULED_DELAY", "expires", True, True, False, _AMQ_NAME, _AMQ_NO_LOCAL, ">",
    ),
    "rabbitmq": BrokerProfile(
        "RabbitMQ", "", "prefetch-count", False, False, "nack", "asc", False,
        "", "expiration", True, True, False, "durable", "", "#",
    ),
    "unknown": BrokerProfile(
        "unknown", "", "", False, True, "nack", "asc", False, "", "expires",
        False, False, False,
    ),
}


#: Values of the ``?dialect=`` URL option: the broker profile to speak whatever the
#: CONNECTED frame says (e.g. ActiveMQ's headers to jmspy broker, to test code written for
#: ActiveMQ against the bundled broker).
DIALECTS: Final = ("jmspy", "artemis", "activemq", "rabbitmq", "unknown")


def detect_broker(server: str | None, dialect: str | None = None) -> BrokerProfile:
    """The profile for a CONNECTED ``server`` header ("ActiveMQ/5.17.2", "RabbitMQ/3.10.8",
    "ActiveMQ-Artemis/2.x", "jmspy-broker_ref/0.1"); unknown servers get the plain-STOMP
    profile (no window header, server-side selectors assumed). ``dialect`` (one of
    :data:`DIALECTS`) forces a profile."""
    text = (server or "").strip()
    low = text.lower()
    if dialect is not None:
        key = dialect
    elif low.startswith("jmspy"):
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


_MULTI_WORD: Final = frozenset({"#", ">"})
_WILDCARD_HOW: Final = {
    "": "`*`, `#` and `>` sent as written",
    "#": "`*`; `>` sent as `#`",
    ">": "`*`; `#` sent as `>`",
}


def subscribe_destination(dest: Destination, profile: BrokerProfile) -> str:
    """The SUBSCRIBE destination: as :func:`stomp_destination`, with a topic's multi-word
    wildcard spelled the broker's way (ActiveMQ 5 knows only ``>``, RabbitMQ and Artemis
    only ``#``), so ``prices.#`` means the same on every broker."""
    multi = profile.multi_wildcard
    if not multi or not isinstance(dest, Topic):
        return stomp_destination(dest)
    words = dest.name.split(".")
    if not _MULTI_WORD.intersection(words):
        return f"/topic/{dest.name}"
    return "/topic/" + ".".join(multi if w in _MULTI_WORD else w for w in words)


#: Queue names of the TemporaryQueues jmspy emulates on RabbitMQ (``/amq/queue/NAME``)
TEMP_QUEUE_PREFIX: Final = "jmspy-temp-"


def parse_destination(text: str | None) -> Destination | None:
    """The Destination a STOMP destination header names. Destinations are immutable, and
    a consumer sees the same few names on every MESSAGE, so parsed ones are kept (up to
    :data:`_PARSED_MAX`): building one checks the name character by character."""
    if not text:
        return None
    parsed = _parsed.get(text)
    if parsed is None:
        parsed = _parse_destination(text)
        if len(_parsed) >= _PARSED_MAX:
            _parsed.clear()
        _parsed[text] = parsed
    return parsed


_PARSED_MAX: Final = 1024
_parsed: dict[str, Destination] = {}


def _parse_destination(text: str) -> Destination:
    if text.startswith(("/amq/queue/" + TEMP_QUEUE_PREFIX, "/queue/" + TEMP_QUEUE_PREFIX)):
        # An emulated RabbitMQ TemporaryQueue, in reply-to (/amq/queue/) or as the
        # destination RabbitMQ names on MESSAGE (/queue/): replies go to /amq/queue/,
        # which sends to the existing queue instead of re-declaring it.
        return TemporaryQueue("/amq/queue/" + text.split("/")[-1])
    for prefix, kind in (("/queue/", Queue), ("/topic/", Topic), ("/amq/queue/", Queue)):
        if text.startswith(prefix):
            return kind(text[len(prefix):])
    if text.startswith(("/temp-queue/", "/remote-temp-queue/", "/reply-queue/")):
        return TemporaryQueue(text)
    return Queue(text)


# -- messages ----------------------------------------------------------------------------
#: Headers that are protocol or JMS header fields, never application properties.
RESERVED_HEADERS: Final = frozenset(
    {
        "destination", "content-type", "content-length", "receipt", "transaction",
        "persistent", "priority", "expires", "expiration", "correlation-id", "reply-to",
        "type", "message-id", "timestamp", "subscription", "ack", "redelivered",
        "AMQ_SCHEDULED_DELAY", "delivery-mode", "original-destination", "x-queue-name",
        "x-exchange", "x-routing-key",
    }
)


def to_frame(message: Message, profile: BrokerProfile) -> tuple[str, bytes, dict[str, str]]:
    """(destination, body, headers) for a SEND. Raises ValueError for what the broker
    cannot carry (the caller turns it into UnsupportedFeatureException)."""
    assert message.destination is not None and message.message_id is not None
    # Every header costs each hop a parse (stomp.py unescapes each one with two regex
    # substitutions: ~3.5 us a header per MESSAGE), so values that mean the same when
    # absent stay off the wire: ``persistent:false`` (STOMP's default is non-persistent
    # on every profile) and priority 4 (JMS's default, and what from_frame assumes) --
    # except on RabbitMQ, where a missing priority is 0, not 4, in a priority queue; and
    # JMSMessageID, JMSTimestamp, the body kind and the property types share one header
    # (jmspy/stomp_jms_header.py says what that saved on ActiveMQ).
    headers: dict[str, str] = {}
    if message.delivery_mode == 2:
        headers["persistent"] = "true"
    if message.priority != 4 or profile.family == "RabbitMQ":
        headers["priority"] = str(message.priority)
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
        code = TYPE_CODES.get(type(value))
        if code is not None:
            types.append(f"{name}={code}")
        headers[name] = str(value).lower() if isinstance(value, bool) else str(value)
    body: bytes
    kind = ""
    if isinstance(message, TextMessage):
        body = (message.text or "").encode("utf-8")
        headers["content-type"] = "text/plain;charset=utf-8"
        if message.text is None:  # a text/* content-type alone reads back as text
            kind = "null-text"
    elif isinstance(message, BytesMessage):
        body = message.body
        headers["content-type"] = "application/octet-stream"
        kind = "bytes"
    elif isinstance(message, MapMessage):
        body = json.dumps(
            {k: {"b64": v.hex()} if isinstance(v, bytes) else v for k, v in message.map.items()}
        ).encode("utf-8")
        headers["content-type"] = "application/json"
        kind = "map"
    else:
        body = b""
        kind = "none"
    headers[JMS_HEADER] = format_header(message.timestamp, kind, ",".join(types),
                                        message.message_id)
    destination = message.destination
    if destination.options:  # a queue's arguments ride on every SEND (RabbitMQ declares)
        headers.update(destination_options.resolve(
            "stomp", profile_key(profile), destination,
            where=profile.server or "unknown server").send_headers)
    return stomp_destination(destination), body, headers


def jms_message_id(headers: dict[str, str]) -> str | None:
    """The JMSMessageID a MESSAGE frame carries (what ``from_frame`` would set),
    without converting the rest of it."""
    fields = header_of(headers)
    return fields.message_id if fields is not None else unfolded_message_id(headers)


def unfolded_message_id(headers: dict[str, str]) -> str | None:
    """The id of a frame without a readable ``jmspy-jms`` header: an earlier jmspy's own
    header, else the broker's ``message-id`` (a raw client's message)."""
    return headers.get("jmspy-message-id") or headers.get("message-id")


def absolute_expiration(relative: str, timestamp: int) -> int:
    """JMSExpiration (absolute epoch ms) from RabbitMQ's ``expiration`` header, which is
    the AMQP per-message TTL in ms *relative to when it was published* (to_frame sends
    ``JMSExpiration - JMSTimestamp``). The send time is JMSTimestamp; a message from a
    client that sets none is taken as published now. Not a number: never expires."""
    ttl = header_int(relative, -1)
    if ttl < 0:
        return 0
    return (timestamp or int(time.time() * 1000)) + ttl


def header_int(text: str | None, default: int = 0) -> int:
    """A numeric header's value; ``default`` when it is absent, empty or not a number."""
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        return default


# -- the STOMP columns of the capability matrix (jmspy.transports.capabilities) ----------
#: The matrix columns, in order: profile key -> column title.
STOMP_TARGETS: Final = {
    "jmspy": "jmspy broker",
    "activemq": "ActiveMQ 5",
    "artemis": "Artemis",
    "rabbitmq": "RabbitMQ",
    "unknown": "other STOMP servers",
}


def profile_key(p: BrokerProfile) -> str:
    """The key of ``p`` in :data:`STOMP_TARGETS` (and in the capability matrix)."""
    return p.family.lower()


def stomp_cells(key: str) -> dict[Feature, Cell]:
    """How the broker of profile ``key`` carries each feature, read off its profile, so the
    docs, the refusals (``StompTransport._require``) and the headers cannot disagree."""
    p = _PROFILES[key]
    if p.family == "jmspy":
        window = native("`jmspy-flow-limit` / `jmspy-flow-threshold`")
    elif p.window_in_bytes:
        window = emulated(f"`{p.window}` = limit x 1 KiB; count enforced by the client")
    elif p.window:
        window = native(f"window as `{p.window}`; threshold emulated by the client stash")
    else:
        window = emulated("no window header: the client stash bounds what the app holds")
    other = "a broker with it (see the other columns)"
    queue_selector = (
        native("`selector`") if p.server_selectors else refused(
            "no server-side selectors, and a client-side filter would consume (delete) what "
            "it skips",
            "use a topic, or add `?rabbitmq_queue_selectors=discard` to the URL to accept "
            "that non-matching queue messages are acknowledged and dropped",
        )
    )
    return {
        Feature.CONSUMER_WINDOW: window,
        Feature.CONNECTION_FLOW_LIMIT: native("`jmspy-connection-flow-limit` on CONNECT")
        if p.family == "jmspy" else emulated(
            "the client stash; the broker's window is per subscription"),
        Feature.QUEUES: native("`/queue/NAME`"),
        Feature.TOPIC_SELECTORS: (
            native("`selector`") if p.server_selectors
            else emulated("in the client; non-matching copies are acknowledged and dropped")
        ),
        Feature.QUEUE_SELECTORS: queue_selector,
        Feature.TRANSACTIONS: native("BEGIN / COMMIT / ABORT"),
        Feature.REDELIVERY: (
            native("NACK") if p.cancel == "nack"
            else emulated("re-SUBSCRIBE (a NACK would dead-letter the message); "
                          "non-durable topic subscriptions: from the client's copy")
        ),
        Feature.DELIVERY_COUNT: (
            native("`jmspy-delivery-count`") if p.family == "jmspy"
            else emulated("`redelivered` + the client's own count")
        ),
        Feature.BROWSER: native("`browser:true`") if p.browse else refused(
            "no STOMP browse subscription", f"consume the messages, or use {other}"),
        Feature.DELIVERY_DELAY: native(f"`{p.delay_header}`") if p.delay_header else refused(
            "no STOMP header for scheduled delivery",
            f"delay in the application, or use {other}"),
        Feature.PRIORITY: native("`priority` (the broker decides the order)"),
        Feature.TIME_TO_LIVE: native(
            "`expires` (absolute)" if p.ttl_header == "expires"
            else "`expiration` (relative; read back as JMSTimestamp + TTL)"),
        Feature.HEADERS: native("STOMP headers + `jmspy-*` (property values as strings)"),
        Feature.DURABLE_SUBSCRIPTIONS: native(
            "`durable:true` + `auto-delete:false`, queue `x-queue-name` from client id + "
            "name" if p.durable_header == "durable"
            else f"`{p.durable_header}`") if p.durable else refused(
            "no known durable-subscription header", f"use {other}"),
        Feature.UNSUBSCRIBE: native("UNSUBSCRIBE naming the subscription") if p.durable
        else refused("no known way to delete a durable subscription over STOMP",
                     "delete it with the broker's own tools"),
        Feature.SHARED_SUBSCRIPTIONS: native(
            f"`{p.shared_header}-subscription` / `{p.shared_header}-durable-subscription`"
        ) if p.shared_header else refused(
            "STOMP has no shared-subscription header jmspy can rely on",
            "consume from a queue (competing consumers)"),
        Feature.NO_LOCAL: native(f"`{p.no_local_header}`") if p.no_local_header else refused(
            "no STOMP no-local header",
            "filter your own messages out with a property and a selector"),
        Feature.OVERLAPPING_SUBSCRIPTIONS: native("one subscription id each"),
        Feature.WILDCARD_SUBSCRIPTIONS: native(_WILDCARD_HOW[p.multi_wildcard]),
        Feature.TEMPORARY_QUEUES: (
            emulated(f"an exclusive, non-durable `/amq/queue/{TEMP_QUEUE_PREFIX}*` queue "
                     "declared and deleted by the creator (`/temp-queue/` works only in "
                     "reply-to)") if p.family == "RabbitMQ"
            else native("`/temp-queue/`")) if p.temporary_queues else refused(
            "no known temporary-destination prefix", "use a uniquely named queue"),
        Feature.DESTINATION_STATS: native("`/jmspy/stats`") if p.stats else refused(
            _NO_STATS.get(key, "STOMP has no statistics request"),
            "use the broker's management tools"),
        Feature.DESTINATION_OPTIONS: destination_options.cell("stomp", key),
        Feature.READING_LEASES: native("ACK with `jmspy-lease`, SEND to `/jmspy/leases`")
        if p.family == "jmspy" else refused(
            "an ACK settles a message only on the connection it came on",
            "acknowledge on the connection that received the message, or use jmspy "
            "broker"),
    }


_NO_STATS: Final = {
    "rabbitmq": "RabbitMQ shows them only over its management HTTP API",
    "activemq": "ActiveMQ 5 answers statistics requests with a MapMessage its STOMP "
    "connector can only render with XStream, which Debian's package lacks (use JMX or "
    "the web console)",
}
