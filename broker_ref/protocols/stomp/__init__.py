"""STOMP 1.0/1.1/1.2 over the reference broker core.

:mod:`.protocol` is the sans-I/O session (frames in, frames out), :mod:`.mapping` turns
headers into core messages and back, :mod:`.server` is the asyncio host.
"""

from .protocol import StompSession
from .server import StompServer

__all__ = ["StompServer", "StompSession"]
