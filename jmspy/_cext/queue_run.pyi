"""Stub for the compiled twin built from cython_ext/queue_run.pyx.

Same signatures as :mod:`jmspy._pure.queue_run`.
"""

from typing import Any, Final

from jmspy.broker_ref.core.api import ServerMessage
from jmspy.broker_ref.core.consumer import MessageRef, ServerConsumer

__all__ = [
    "DELIVERING", "GONE", "READY", "acknowledge_tags", "dispatch_fast", "enqueue",
    "route_send", "take_run",
]

READY: Final[int]
DELIVERING: Final[int]
GONE: Final[int]
PRIORITIES: Final[int]

def take_run(
    queue: Any, c: ServerConsumer, room: int
) -> tuple[list[ServerMessage], list[int], int, MessageRef | None]: ...
def acknowledge_tags(owners: dict[int, ServerConsumer], tags: list[int]) -> list[Any]: ...
def enqueue(queue: Any, message: ServerMessage) -> None: ...
def dispatch_fast(queue: Any) -> None: ...
def route_send(conn: Any, message: ServerMessage, tx: str | None = None) -> None: ...
