"""Operator actions on a broker: purge a queue, delete or move one message, retry a
dead-letter queue, and the connections with their consumers' flow windows.

What ActiveMQ's ``QueueViewMBean`` (``purge``, ``removeMessage``, ``moveMessageTo``,
``retryMessages``) and Artemis' ``QueueControl`` offer over JMX; here a host (the HTTP
management API) calls these functions on the broker's own thread, like every other
core call. Sans-I/O, no security: the caller checks the ``admin`` permission first
(:meth:`~.security.SecurityPolicy.authorize`).

The actions work on the messages a queue holds *ready*, in RAM or paged out to disk
(seed 002); a message in delivery belongs to its consumer until it is acknowledged or
returned. A purge or a retry goes through a paged backlog a batch at a time (each batch
comes into RAM once the one before is dealt with, so RAM holds about one batch whatever
the backlog); a message looked up by id is searched for on disk a chunk of rows at a
time without being brought in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .api import DEAD_LETTER_REASON, ORIGINAL_DESTINATION, DestinationKind, ServerMessage
from .consumer import GONE, MessageRef
from .errors import BrokerError, DestinationNotFound, InvalidDestination
from .windows import ConsumerWindow, consumer_windows

if TYPE_CHECKING:
    from .broker import Broker
    from .connection import ServerConnection
    from .queue import Queue

__all__ = [
    "ConnectionInfo",
    "ConnectionNotFound",
    "ConsumerWindow",
    "MessageNotFound",
    "PurgeResult",
    "RetryResult",
    "connection_info",
    "find_connection",
    "move_message",
    "purge",
    "remove_message",
    "retry_dead_letters",
]


class MessageNotFound(BrokerError):
    """No message with that id is ready on the queue (consumed, in delivery, paged out
    or never there)."""

    code = "message-not-found"


@dataclass(slots=True, frozen=True)
class PurgeResult:
    """``removed``: messages the purge deleted, in RAM and on disk; ``paged_left``:
    messages still paged out after it (0 unless others were paged out meanwhile)."""

    removed: int
    paged_left: int


@dataclass(slots=True, frozen=True)
class RetryResult:
    """``moved``: message id -> the destination it went back to; ``skipped``: ids of
    messages without an original destination (left on the dead-letter queue)."""

    moved: dict[str, str]
    skipped: list[str]


@dataclass(slots=True, frozen=True)
class ConnectionInfo:
    """One open connection: who, its connection flow limit, its consumers."""

    connection_id: int
    user: str | None
    client_id: str | None
    flow_limit: int | None
    consumers: list[ConsumerWindow]


def _queue(broker: Broker, name: str) -> Queue:
    q = broker.queues.get(name)
    if q is None:
        raise DestinationNotFound(f"no queue named {name!r}; list the queues first")
    return q


def _take(q: Queue, ref: MessageRef) -> ServerMessage:
    """Take the ready ``ref`` off ``q`` for good: out of its level, forgotten by the
    queue's policy, its row removed from the store."""
    q.levels.remove(ref)
    ref.state = GONE
    policy = q.policy
    if policy is not None:
        policy.forget(ref)
    q.removals.unstore(ref.message)
    return ref.message


def _space_freed(broker: Broker) -> None:
    """Messages left RAM: producers parked by flow control may go on."""
    flow = broker.flow
    if flow.parked:
        flow.resume()


def _find(q: Queue, message_id: str) -> MessageRef | None:
    for ref in q.levels.ready():
        if ref.message.message_id == message_id:
            return ref
    return None


def _not_found(q: Queue, message_id: str) -> MessageNotFound:
    return MessageNotFound(
        f"no message {message_id!r} is ready on queue {q.name!r}: it was consumed, is "
        "in delivery to a consumer, or never was there; browse the queue for the ids "
        "it holds")


def _take_id(q: Queue, message_id: str,
             check: Callable[[ServerMessage], object] | None = None) -> ServerMessage:
    """Take the ready message ``message_id`` off ``q`` for good, from RAM or from the
    part paged out to disk (read a chunk at a time, not brought in); ``check(message)``
    runs first and, if it raises, leaves the message where it was."""
    ref = _find(q, message_id)
    if ref is not None:
        if check is not None:
            check(ref.message)
        return _take(q, ref)
    pages = q.pages
    message = None if pages is None else pages.take_id(message_id, check)
    if message is None:
        raise _not_found(q, message_id)
    q.removals.unstore(message)
    return message


def _each_ready(q: Queue) -> Iterator[MessageRef]:
    """Every ready message of ``q`` once, RAM first, then the part on disk a batch at a
    time (each batch comes into RAM when the caller has dealt with the one before, so an
    operator's pass over a paged backlog of any size holds about one batch in RAM)."""
    # refs the caller left in place (a retry skips some) are not met twice; they stay in
    # the queue meanwhile, so their ids are not reused
    kept: set[int] = set()
    while True:
        for ref in list(q.levels.ready()):
            if id(ref) not in kept:
                yield ref
                if ref.state != GONE:
                    kept.add(id(ref))
        pages = q.pages
        if pages is None or not pages.bring_next():
            return


def purge(broker: Broker, name: str) -> PurgeResult:
    """Delete every ready message of queue ``name``, in RAM and paged out to disk."""
    q = _queue(broker, name)
    removed = 0
    for ref in _each_ready(q):
        _take(q, ref)
        removed += 1
    _space_freed(broker)
    return PurgeResult(removed, q.paged_count)


def remove_message(broker: Broker, name: str, message_id: str) -> ServerMessage:
    """Delete the ready message ``message_id`` from queue ``name``; returns it."""
    q = _queue(broker, name)
    message = _take_id(q, message_id)
    _space_freed(broker)
    return message


def _target_kind(broker: Broker, target: str, kind: DestinationKind | None) -> DestinationKind:
    if kind is not None:
        return kind
    if target in broker.queues:
        return DestinationKind.QUEUE
    if target in broker.post_office.topics:
        return DestinationKind.TOPIC
    return DestinationKind.QUEUE


def move_message(broker: Broker, name: str, message_id: str, target: str,
                 kind: DestinationKind | None = None) -> None:
    """Move the ready message ``message_id`` from queue ``name`` to ``target`` (a queue,
    or a topic when ``kind`` says so or a topic of that name exists). The target is
    checked first: a move that cannot be routed leaves the message where it was."""
    if target == name and kind is not DestinationKind.TOPIC:
        raise InvalidDestination(
            f"cannot move a message from {name!r} to itself; name another destination")
    q = _queue(broker, name)
    kind = _target_kind(broker, target, kind)
    if kind is DestinationKind.QUEUE and target not in broker.queues:
        raise DestinationNotFound(
            f"no queue named {target!r} to move the message to; create it first (send "
            "to it, or declare it in the broker's configuration)")
    moved: list[ServerMessage] = []

    def routable(message: ServerMessage) -> None:  # raises before the source loses it
        copy = dataclasses.replace(message, destination=target, kind=kind)
        broker.post_office.check_routable(copy)
        moved.append(copy)

    _take_id(q, message_id, routable)
    broker.post_office.route(moved[0], None)
    _space_freed(broker)


def retry_dead_letters(broker: Broker, name: str) -> RetryResult:
    """Send every ready message of the dead-letter queue ``name`` back to the
    destination it was dead-lettered from (its ``JMS_jmspy_OriginalDestination``),
    without the dead-letter properties; ActiveMQ's ``retryMessages``."""
    q = _queue(broker, name)
    moved: dict[str, str] = {}
    skipped: list[str] = []
    for ref in _each_ready(q):
        message = ref.message
        origin = message.properties.get(ORIGINAL_DESTINATION)
        if not isinstance(origin, str) or not origin or origin == name:
            skipped.append(message.message_id)  # stays, in RAM: an operator's to see
            continue
        props = {k: v for k, v in message.properties.items()
                 if k not in (ORIGINAL_DESTINATION, DEAD_LETTER_REASON)}
        kind = _target_kind(broker, origin, None)
        back = dataclasses.replace(message, properties=props, destination=origin, kind=kind)
        broker.post_office.check_routable(back)
        _take(q, ref)
        broker.post_office.route(back, None)
        moved[message.message_id] = origin
    _space_freed(broker)
    return RetryResult(moved, skipped)


def connection_info(broker: Broker) -> list[ConnectionInfo]:
    """Every open connection with its consumers' flow windows."""
    return [
        ConnectionInfo(conn.connection_id, conn.user, conn.client_id, conn.flow_limit,
                       consumer_windows(conn))
        for conn in broker.connections()
    ]


def find_connection(broker: Broker, connection_id: int) -> ServerConnection:
    """The open connection ``connection_id``, or :class:`ConnectionNotFound`."""
    for conn in broker.connections():
        if conn.connection_id == connection_id:
            return conn
    raise ConnectionNotFound(
        f"no open connection {connection_id}; list the connections for their ids")


class ConnectionNotFound(BrokerError):
    """No open connection has that id (it closed, or never was)."""

    code = "connection-not-found"
