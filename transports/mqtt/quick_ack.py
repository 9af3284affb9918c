"""No delayed-ACK stall for a synchronous MQTT send on a connection that also consumes.

The stall (measured against Mosquitto 2, plain and TLS alike: 88 ms per QoS 1 ``send()``
instead of under 1 ms) is two 40 ms waits, each Nagle's algorithm on one side holding a
small packet until the other side's delayed TCP ACK of the one before:

1. the client writes the PUBACK of a message it received, then its next PUBLISH; with
   Nagle on, the PUBLISH waits until the broker ACKs the PUBACK's segment, and the broker,
   with nothing to answer a PUBACK with, delays that ACK. TCP_NODELAY on the client's
   socket ends this one; it is set at the first synchronous send (before its PUBLISH),
   as the STOMP transport sets it at connect (stomp/connect.py).
2. the broker writes the message it delivers to this connection, then the PUBACK of the
   client's PUBLISH; Mosquitto leaves Nagle on (its ``set_tcp_nodelay`` is false by
   default), so the PUBACK waits until the client ACKs the delivery, and the client's
   kernel delays that ACK (the connection looks interactive to it). Nothing on the
   client can turn the broker's Nagle off; what it can do is ACK at once: Linux's
   TCP_QUICKACK, set after a read, sends the pending ACK now. So while a synchronous
   send waits for its PUBACK, each packet read (the delivery) is followed by that
   ``setsockopt`` (one system call, only while a send waits).

Through the socket's public API only (``client.socket()`` is paho's own accessor), so it
holds on every paho release and over TLS (an ``SSLSocket`` passes socket options to its
TCP socket). Where the platform has no TCP_QUICKACK, the second step is skipped.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any, Final

__all__ = ["QUICKACK", "QuickAck"]

#: Linux's TCP_QUICKACK (None elsewhere: no quick ACK, the wait stays the kernel's).
QUICKACK: Final = getattr(socket, "TCP_QUICKACK", None)

MessageHandler = Callable[[Any, Any, Any], None]


class QuickAck:
    """For one MQTT transport: TCP_NODELAY from the first synchronous send on each
    socket, and quick ACKs of what arrives while a synchronous send waits."""

    __slots__ = ("_lock", "_no_delay_on", "waiting")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: synchronous sends waiting for their PUBACK now (read without the lock on
        #: paho's thread: a stale answer costs one quick ACK, or one delayed one)
        self.waiting = 0
        self._no_delay_on: Any = None  # the socket TCP_NODELAY was set on

    def begin(self, client: Any) -> None:
        """A synchronous send is about to PUBLISH on ``client`` and wait for its PUBACK."""
        sock = _socket_of(client)
        with self._lock:
            self.waiting += 1
            if sock is None or sock is self._no_delay_on:
                return
            self._no_delay_on = sock
        _set(sock, socket.TCP_NODELAY)

    def end(self) -> None:
        """That send's wait is over (PUBACK, timeout or failure)."""
        with self._lock:
            self.waiting -= 1

    def wrap(self, handler: MessageHandler) -> MessageHandler:
        """paho's ``on_message`` callback ``handler``, first acking at once what was
        just read while a synchronous send waits."""

        def on_message(client: Any, userdata: Any, message: Any) -> None:
            if self.waiting and QUICKACK is not None:
                sock = _socket_of(client)
                if sock is not None:
                    _set(sock, QUICKACK)
            handler(client, userdata, message)

        return on_message


def _socket_of(client: Any) -> Any:
    try:
        return client.socket()
    except Exception:
        return None  # no socket (closed meanwhile): nothing to tune


def _set(sock: Any, option: int) -> None:
    try:
        sock.setsockopt(socket.IPPROTO_TCP, option, 1)
    except (OSError, ValueError, AttributeError):
        pass  # closed meanwhile, or not a TCP socket: nothing to tune
