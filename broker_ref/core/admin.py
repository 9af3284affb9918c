"""Operator actions on a broker: purge a queue, delete or move one message, retry a
dead-letter queue, and the connections with their consumers' flow windows.

What ActiveMQ's ``QueueViewMBean`` (``purge``, ``removeMessage``, ``moveMessageTo``,
``retryMessages``) and Artemis' ``QueueControl`` offer over JMX; here a host (the HTTP
management API) calls these functions on the broker's own thread, like every other
core call. Sans-I/O, no security: the caller checks the ``admin`` permission first
(:meth:`~.security.SecurityPolicy.authorize`).

The actions work on the messages a queue holds *ready in RAM*: a message in delivery
belongs to its consumer until it is acknowledged or returned, and one paged out to disk
(seed 002) comes back into RAM as the queue drains. :class:`PurgeResult` says how many
paged messages a purge left, so an operator knows to purge again; a message looked up
by id that is paged out is reported as not found with that reason.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .api import DEAD_LETTER_REASON, ORIGINAL_DESTINATION, DestinationKind, ServerMessage
from .consumer import GONE, MessageRef
from .errors import BrokerError, DestinationNotFound, InvalidDestination

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
    """``removed``: messages the purge deleted; ``paged_left``: paged-out messages it
    could not reach (purge again once they are paged in)."""

    removed: int
    paged_left: int


@dataclass(slots=True, frozen=True)
class RetryResult:
    """``moved``: message id -> the destination it went back to; ``skipped``: ids of
    messages without an original destination (left on the dead-letter queue)."""

    moved: dict[str, str]
    skipped: list[str]


@dataclass(slots=True, frozen=True)
class ConsumerWindow:
    """One consumer's flow window as the broker sees it.

    ``credit`` is what the client granted and has not been used yet (its prefetch
    window); ``delivering`` the messages out and unacknowledged; ``limit`` the most it
    may hold unacknowledged and ``limit_set_by`` who set that limit (``destination``: the
    destination's ``consumer_flow_limit``; ``client``: no broker limit, the client's
    credit is the only bound)."""

    consumer_id: int
    queue: str
    credit: int
    delivering: int
    limit: int | None
    limit_set_by: str
    has_selector: bool


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


def _find(q: Queue, message_id: str) -> MessageRef:
    for ref in q.levels.ready():
        if ref.message.message_id == message_id:
            return ref
    paged = (" (the queue has messages paged out to disk: it may be one of them; try "
             "again once the queue has drained)") if q.paged_count else ""
    raise MessageNotFound(
        f"no message {message_id!r} is ready on queue {q.name!r}: it was consumed, is "
        f"in delivery to a consumer, or never was there{paged}; browse the queue for "
        "the ids it holds")


def purge(broker: Broker, name: str) -> PurgeResult:
    """Delete every ready message of queue ``name`` (in RAM)."""
    q = _queue(broker, name)
    refs = list(q.levels.ready())
    for ref in refs:
        _take(q, ref)
    _space_freed(broker)
    return PurgeResult(len(refs), q.paged_count)


def remove_message(broker: Broker, name: str, message_id: str) -> ServerMessage:
    """Delete the ready message ``message_id`` from queue ``name``; returns it."""
    q = _queue(broker, name)
    message = _take(q, _find(q, message_id))
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
    ref = _find(q, message_id)
    kind = _target_kind(broker, target, kind)
    if kind is DestinationKind.QUEUE and target not in broker.queues:
        raise DestinationNotFound(
            f"no queue named {target!r} to move the message to; create it first (send "
            "to it, or declare it in the broker's configuration)")
    copy = dataclasses.replace(ref.message, destination=target, kind=kind)
    broker.post_office.check_routable(copy)  # raises before the source loses it
    _take(q, ref)
    broker.post_office.route(copy, None)
    _space_freed(broker)


def retry_dead_letters(broker: Broker, name: str) -> RetryResult:
    """Send every ready message of the dead-letter queue ``name`` back to the
    destination it was dead-lettered from (its ``JMS_jmspy_OriginalDestination``),
    without the dead-letter properties; ActiveMQ's ``retryMessages``."""
    q = _queue(broker, name)
    moved: dict[str, str] = {}
    skipped: list[str] = []
    for ref in list(q.levels.ready()):
        message = ref.message
        origin = message.properties.get(ORIGINAL_DESTINATION)
        if not isinstance(origin, str) or not origin or origin == name:
            skipped.append(message.message_id)
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


def _windows(conn: ServerConnection) -> list[ConsumerWindow]:
    return [
        ConsumerWindow(
            consumer_id=c.consumer_id,
            queue=c.queue.name,
            credit=c.credit,
            delivering=len(c.delivering),
            limit=c.flow_limit,
            limit_set_by="destination" if c.flow_limit is not None else "client",
            has_selector=c.filter is not None,
        )
        for c in conn.consumers()
    ]


def connection_info(broker: Broker) -> list[ConnectionInfo]:
    """Every open connection with its consumers' flow windows."""
    return [
        ConnectionInfo(conn.connection_id, conn.user, conn.client_id, conn.flow_limit,
                       _windows(conn))
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
