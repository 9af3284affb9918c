"""A connection's temporary queues (JMS ``TemporaryQueue``): made by one connection, named
after it, usable by anyone who knows the name, deleted only by their creator and gone when
that connection closes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .api import TEMP_PREFIX
from .errors import AccessDenied, DestinationNotFound, IllegalBrokerState

if TYPE_CHECKING:
    from .postoffice import PostOffice
    from .queue import Queue

__all__ = ["TemporaryQueues"]


class TemporaryQueues:
    """The temporary queues of one connection (``connection_id``)."""

    __slots__ = ("_connection_id", "_post", "_queues", "_seq")

    def __init__(self, post: PostOffice, connection_id: int) -> None:
        self._post = post
        self._connection_id = connection_id
        self._queues: dict[str, Queue] = {}
        self._seq = 0

    def owns(self, name: str) -> bool:
        return name in self._queues

    def create(self) -> str:
        self._seq += 1
        name = f"{TEMP_PREFIX}{self._connection_id}-{self._seq}"
        self._queues[name] = self._post.new_queue(name, owner_connection=self._connection_id)
        return name

    def delete(self, name: str) -> None:
        """Delete one; refused for another connection's queue or one with consumers."""
        q = self._queues.get(name)
        if q is None:
            if self._post.queues.get(name) is not None:
                raise AccessDenied(
                    f"{name!r} belongs to another connection; only its creator may delete it"
                )
            raise DestinationNotFound(f"temporary queue {name!r} does not exist")
        if q.consumers:
            raise IllegalBrokerState(
                f"temporary queue {name!r} still has consumers; close them before deleting it"
            )
        del self._queues[name]
        self._post.remove_queue(name)
        q.delete()

    def delete_all(self) -> None:
        """The connection closed: its temporary queues go, with what they held."""
        for name, q in self._queues.items():
            self._post.remove_queue(name)
            q.delete()
        self._queues.clear()
