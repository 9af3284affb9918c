"""Stub for the compiled twin built from cython_ext/dispatch.pyx.

Same signature as :func:`jmspy._pure.dispatch.drain`; both satisfy
:class:`jmspy.dispatch_protocol.DrainFunction`.
"""

from collections import deque
from typing import Any

from jmspy.dispatch_protocol import DrainConnection, DrainConsumer, DrainSession

__all__ = ["consumed_counts", "drain", "held_tags", "take_held"]

def drain(
    session: DrainSession,
    connection: DrainConnection,
    consumer: DrainConsumer,
) -> int: ...

def take_held(pending: deque[tuple[Any, int]]) -> list[tuple[Any, int]]: ...
def held_tags(items: list[tuple[Any, int]]) -> list[int]: ...
def consumed_counts(items: list[tuple[Any, int]], floor: int) -> list[tuple[Any, int]]: ...
