"""Stub for the compiled twin built from cython_ext/stomp_received.pyx.

Same functions as :mod:`jmspy.transports.stomp.received` (the pure twin).
"""

from jmspy.message import Message

__all__ = ["derived_sizes", "from_frame"]

def derived_sizes() -> tuple[int, int]: ...
def from_frame(headers: dict[str, str], body: bytes | str) -> Message: ...
