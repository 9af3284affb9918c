"""Closing a socket after a last word (a STOMP ERROR, an MQTT DISCONNECT or refusing
CONNACK) without losing that word to a RST.

A client may still be sending -- the rest of a packet refused for its size, the packets
it pipelined behind a refused CONNECT -- and a socket closed with unread input answers
with a RST, on which the kernel drops what it had not sent yet: the reply that says why.
So the write side is shut first (FIN after the reply), what still arrives is read and
dropped for at most :data:`LINGER_S` (a client closes on the FIN), then the socket is
closed. Both protocol hosts end their connections this way.
"""

from __future__ import annotations

import asyncio

__all__ = ["LINGER_S", "end_after_linger"]

#: seconds a closing socket is read (and what arrives dropped) after its FIN
LINGER_S = 2.0


def end_after_linger(transport: asyncio.Transport, lingering: set[asyncio.Transport],
                     loop: asyncio.AbstractEventLoop) -> None:
    """Close ``transport`` once its pending output is written (see the module docstring);
    it is in ``lingering`` meanwhile, for its host to abort on stop."""
    if transport.is_closing():
        return
    try:
        transport.write_eof()
        transport.resume_reading()
    except (NotImplementedError, RuntimeError, OSError):  # TLS: no half-close
        transport.close()
        return
    lingering.add(transport)

    def end() -> None:
        lingering.discard(transport)
        transport.close()

    loop.call_later(LINGER_S, end)
