"""STOMP 1.0/1.1/1.2 over the reference broker core.

:mod:`.protocol` is the sans-I/O session (frames in, frames out), :mod:`.mapping` turns
headers into core messages and back, :mod:`.server` is the asyncio host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy._lazy import facade

# A façade (see jmspy._lazy): each public name's module is loaded when the name is first
# used, so a module of this package importing a sibling never runs the others.
if TYPE_CHECKING:
    from .protocol import StompSession
    from .server import StompServer

_PUBLIC: dict[str, str] = {
    "StompServer": "server",
    "StompSession": "protocol",
}

__all__ = ["StompServer", "StompSession"]


__getattr__, __dir__ = facade(__name__, globals(), _PUBLIC)
