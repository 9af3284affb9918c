"""Stub for the compiled twin built from cython_ext/dispatch.pyx.

Same signature as :func:`jmspy._pure.dispatch.drain`; both satisfy
:class:`jmspy.dispatch_protocol.DrainFunction`.
"""

from typing import Final

from jmspy.dispatch_protocol import DrainConnection, DrainConsumer, DrainSession

__all__ = ["AUTO_ACKNOWLEDGE", "drain"]

AUTO_ACKNOWLEDGE: Final[int]

def drain(
    session: DrainSession,
    connection: DrainConnection,
    consumer: DrainConsumer,
    ack_batch: int,
) -> int: ...
