"""Stub for the compiled twin built from cython_ext/queue_run.pyx.

Same signature as :func:`jmspy._pure.queue_run.take_run`.
"""

from typing import Any, Final

from jmspy.broker_ref.core.api import ServerMessage
from jmspy.broker_ref.core.consumer import MessageRef, ServerConsumer

__all__ = ["DELIVERING", "GONE", "READY", "acknowledge_tags", "take_run"]

READY: Final[int]
DELIVERING: Final[int]
GONE: Final[int]

def take_run(
    queue: Any, c: ServerConsumer, room: int
) -> tuple[list[ServerMessage], list[int], int, MessageRef | None]: ...
def acknowledge_tags(owners: dict[int, ServerConsumer], tags: list[int]) -> list[Any]: ...
