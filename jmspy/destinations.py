"""Destinations: queues (one consumer gets each message) and topics (every subscription does).

Destinations are values: two ``Queue("orders")`` are equal and hash alike, so they can key
dicts. Names are validated once here, at the edge, so the broker and transports can trust
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .errors import InvalidDestinationException

if TYPE_CHECKING:
    from .connection import Connection

__all__ = ["Destination", "Queue", "TemporaryQueue", "Topic", "destination_from_uri"]

MAX_NAME_LENGTH = 255


def _check_name(kind: str, name: object) -> str:
    if not isinstance(name, str):
        raise InvalidDestinationException(
            f"{kind} name must be a str, got {type(name).__name__}: {name!r}"
        )
    if not name:
        raise InvalidDestinationException(f"{kind} name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidDestinationException(
            f"{kind} name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}"
        )
    bad = next((c for c in name if c.isspace() or ord(c) < 32 or c == "\x7f"), None)
    if bad is not None:
        raise InvalidDestinationException(
            f"{kind} name {name!r} contains {bad!r}; use letters, digits and . - _ / : only "
            "(no whitespace or control characters)"
        )
    return name


@dataclass(frozen=True, slots=True)
class Destination:
    """Base of Queue and Topic; ``kind`` is "queue" or "topic"."""

    name: str
    kind: ClassVar[str] = "destination"

    def __post_init__(self) -> None:
        _check_name(self.kind, self.name)

    def __str__(self) -> str:
        return f"{self.kind}://{self.name}"


@dataclass(frozen=True, slots=True)
class Queue(Destination):
    """A point-to-point destination: each message goes to one consumer."""

    kind: ClassVar[str] = "queue"


@dataclass(frozen=True, slots=True)
class Topic(Destination):
    """A publish/subscribe destination: each subscription gets every message."""

    kind: ClassVar[str] = "topic"


class TemporaryQueue(Queue):
    """A queue that lives as long as the connection that created it.

    Only that connection may consume from it; anyone who learns its name (from
    JMSReplyTo) may send to it. ``delete()`` removes it early.
    """

    __slots__ = ("_connection",)
    _connection: Connection | None

    def __init__(self, name: str, connection: Connection | None = None) -> None:
        super().__init__(name)
        object.__setattr__(self, "_connection", connection)

    def __str__(self) -> str:
        # The broker names temporary queues "temp-queue://..." already.
        return self.name if "://" in self.name else f"temp-queue://{self.name}"

    def delete(self) -> None:
        """Delete the queue now; sending to it afterwards fails."""
        conn: Connection | None = self._connection
        if conn is None:
            from .errors import IllegalStateException

            raise IllegalStateException(
                f"{self} was not created by this process's connection; only the connection "
                "that created a temporary queue can delete it"
            )
        conn._delete_temporary_queue(self)


def destination_from_uri(uri: str) -> Destination:
    """Parse ``queue://name`` / ``topic://name`` (as JMSReplyTo travels) into a Destination."""
    kind, sep, name = uri.partition("://")
    if not sep:
        raise InvalidDestinationException(
            f"destination {uri!r} must look like 'queue://NAME' or 'topic://NAME'"
        )
    if kind == "queue":
        return Queue(name)
    if kind == "topic":
        return Topic(name)
    if kind == "temp-queue":
        return TemporaryQueue(uri)  # the broker's own name for it includes the scheme
    raise InvalidDestinationException(
        f"destination {uri!r} has unknown kind {kind!r}; use 'queue://' or 'topic://'"
    )
