"""``vm://`` message mapping: client Message <-> broker ServerMessage (pure twin).

The compiled twin is ``cython_ext/vm_convert.pyx`` (``jmspy._cext.vm_convert``);
``tests/test_vm_convert_twins.py`` converts the same random messages with both and
requires identical results. Change one, change the other.

Received messages are read-only (JMS), so a delivered message shares its body and
property objects with the broker's copy instead of copying them (``clear_body`` /
``clear_properties`` replace rather than mutate). Destinations are frozen values, so every
delivered message shares one instance per name instead of building (and re-validating)
one per message. These functions run once per message sent or delivered, which is why
they avoid per-message work: no re-validation, no per-message lookups of globals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jmspy.broker_ref.core.api import BodyType, DestinationKind, ServerMessage
from jmspy.destinations import Destination, Queue, TemporaryQueue, Topic
from jmspy.message import BytesMessage, MapMessage, Message, TextMessage

__all__ = [
    "DeliverMany",
    "dest_key",
    "to_client_message",
    "to_client_messages",
    "to_destination",
    "to_server_message",
]

_queues: dict[str, Destination] = {}
_topics: dict[str, Destination] = {}
_MAX_CACHED_DESTINATIONS = 4096
_new = Message.__new__  # the record's allocator (a C type's when compiled)
_TEXT, _BYTES, _MAP = BodyType.TEXT, BodyType.BYTES, BodyType.MAP
_QUEUE, _TOPIC = DestinationKind.QUEUE, DestinationKind.TOPIC


def dest_key(destination: Destination) -> tuple[DestinationKind, str]:
    """The broker's (kind, name) for a client destination."""
    return (_TOPIC if isinstance(destination, Topic) else _QUEUE, destination.name)


def to_destination(kind: DestinationKind, name: str) -> Destination:
    """The shared client destination for a broker (kind, name)."""
    cache = _topics if kind is _TOPIC else _queues  # keyed by name: enum hashing is slow
    dest = cache.get(name)
    if dest is None:
        if kind is _TOPIC:
            dest = Topic(name)
        elif name.startswith("temp-queue://"):
            dest = TemporaryQueue(name)
        else:
            dest = Queue(name)
        if len(cache) >= _MAX_CACHED_DESTINATIONS:
            cache.clear()  # many temporary queues: start over, never grow unbounded
        cache[name] = dest
    return dest


def to_server_message(message: Message, connection_id: int) -> ServerMessage:
    """Copy what the broker needs; the sender may reuse its Message after send()."""
    assert message.destination is not None and message.message_id is not None
    kind, name = dest_key(message.destination)
    body: str | bytes | dict[str, Any] | None = message._body
    if isinstance(message, TextMessage):
        body_type = _TEXT
        size = len(body) if body else 0
    elif isinstance(message, BytesMessage):
        body_type = _BYTES
        size = len(message._body)
    elif isinstance(message, MapMessage):
        body_type, body = _MAP, dict(message._body)
        size = message.body_size()
    else:
        body_type, body, size = BodyType.MESSAGE, None, 0
    reply = message.reply_to
    deliver_at = message.delivery_time if message.delivery_time > message.timestamp else 0
    return ServerMessage(
        message_id=message.message_id,
        kind=kind,
        destination=name,
        body_type=body_type,
        body=body,
        properties=dict(message._properties),
        persistent=message.delivery_mode == 2,
        priority=message.priority,
        timestamp=message.timestamp,
        expiration=message.expiration,
        deliver_at=deliver_at,
        correlation_id=message.correlation_id,
        reply_to=dest_key(reply) if reply is not None else None,
        jms_type=message.jms_type,
        producer_connection=connection_id,
        size=size + 64,
    )


def to_client_message(sm: ServerMessage, delivery_tag: int = -1, count: int = 1) -> Message:
    """Build the read-only client Message for one delivery (or a browse: tag -1)."""
    body_type = sm.body_type
    msg: Message
    if body_type is _TEXT:
        msg = _new(TextMessage)
    elif body_type is _BYTES:
        msg = _new(BytesMessage)
        msg._pos = 0
    elif body_type is _MAP:
        msg = _new(MapMessage)
    else:
        msg = _new(Message)
    msg._body = sm.body
    msg.message_id = sm.message_id
    timestamp = msg.timestamp = sm.timestamp
    msg.correlation_id = sm.correlation_id
    reply = sm.reply_to
    msg.reply_to = None if reply is None else to_destination(*reply)
    kind = sm.kind
    dest = (_topics if kind is _TOPIC else _queues).get(sm.destination)
    msg.destination = dest if dest is not None else to_destination(kind, sm.destination)
    msg.delivery_mode = 2 if sm.persistent else 1
    msg.expiration = sm.expiration
    msg.priority = sm.priority
    msg.redelivered = count > 1
    msg.jms_type = sm.jms_type
    msg.delivery_time = sm.deliver_at or timestamp
    msg.delivery_count = count
    msg._properties = sm.properties
    msg._props_read_only = True
    msg._body_read_only = True
    msg._acknowledger = None
    msg._delivery_tag = delivery_tag
    return msg


def to_client_messages(
    messages: list[ServerMessage], first_tag: int, counts: list[int]
) -> list[Message]:
    """A run of deliveries (tags ``first_tag``, ``first_tag + 1``...) as client Messages."""
    if len(counts) < len(messages):
        raise ValueError(f"{len(messages)} messages but only {len(counts)} delivery counts")
    return [
        to_client_message(sm, first_tag + i, counts[i]) for i, sm in enumerate(messages)
    ]


class DeliverMany:
    """The vm connection's hand-over of a run of deliveries: convert, then pass them to
    the client connection's ``on_deliveries(consumer_id, first_tag, messages)``.

    The broker core calls it (``SessionCallback.deliver_many``) on the producer's thread
    for every run it dispatches, so on ``vm://`` it is paid by every send; compiled, it is
    a C callable and the hand-over costs no Python frame of its own.
    """

    __slots__ = ("on_deliveries",)

    def __init__(self, on_deliveries: Callable[[int, int, list[Message]], None]) -> None:
        self.on_deliveries = on_deliveries

    def __call__(
        self, consumer_id: int, first_tag: int, messages: list[ServerMessage], counts: list[int]
    ) -> None:
        self.on_deliveries(consumer_id, first_tag, to_client_messages(messages, first_tag, counts))
