"""Stub for the compiled twin built from cython_ext/dispatch.pyx.

Same signature as :func:`jmspy._pure.dispatch.drain`; both satisfy
:class:`jmspy.dispatch_protocol.DrainFunction`.
"""

from jmspy.dispatch_protocol import DrainConnection, DrainConsumer, DrainSession

__all__ = ["drain"]

def drain(
    session: DrainSession,
    connection: DrainConnection,
    consumer: DrainConsumer,
) -> int: ...
