"""Received packets read from the socket a block at a time, instead of paho's three reads
per packet.

Why: paho reads a packet with one ``recv`` for its first byte, one per byte of its
remaining-length field and one for the rest, and when it has nothing of its own in
flight (a consumer) its loop reads one packet per ``select``. A consumer paid a
``select`` and three ``recv`` calls for every PUBLISH, a producer three for every
PUBACK. On part (d)'s 100-in-flight row (four alternated runs each) the consumer's CPU
per message went from 66-71 to 42-64 us, the producer's from 68-83 to 62-87, and the
rate from 10.2-11.6k to 9.6-15.6k msgs/s (13.3k on average against 11.0k).

How, on one client *instance* (the way :mod:`.publish_read` replaces one paho step):

* ``_sock_recv``, paho's one read step, serves paho's small reads from a block of up to
  64 KiB that it reads from the socket with one ``recv``.
* ``loop_read``, what paho's loop calls when the socket is readable, runs paho's packet
  reader until that block is used up, whatever paho's one-packet-per-call count says.
* One ``recv`` per readable event: once the block is used up the next read reports
  "would block" without a system call, so paho goes back to its loop (writes,
  keep-alive) between blocks. No byte is ever left in the block while paho waits in
  ``select``, so ``select`` stays the truth about pending input; a packet split across
  blocks is paho's ordinary partial read, continued at the next readable event.
* Only on a plain TCP socket: over TLS or WebSockets paho reads as before. A block never
  outlives its socket: after an error or a reconnect it is dropped.

Over TLS (``mqtts://``) this steps aside, on purpose: an ``SSLSocket`` returns at most
one TLS record's plaintext per read and says "no data yet" with ``SSLWantReadError``,
and decrypted bytes can wait inside OpenSSL where ``select`` does not see them; paho's
own read step handles all three (its loop asks ``pending()`` before it sleeps). So every
byte is paho's read over TLS, correct first; tests/interop/test_tls_streams.py streams
a message larger than a record and a burst of 1,000 through it, and checks this step
stood aside.

``tests/test_mqtt_buffered_read.py`` drives a real paho client over a socket pair; the
interop tests check that a connected ``mqtt://`` transport reads this way.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

__all__ = ["BLOCK", "block_reads", "held", "install", "installed"]

#: Bytes asked of the socket per readable event.
BLOCK = 65536
_MARK = "_jmspy_buffered_read"


class _Block:
    """The bytes of one ``recv`` that paho has not taken yet."""

    __slots__ = ("data", "fresh", "pos", "sock")

    def __init__(self) -> None:
        self.data = b""
        self.pos = 0
        self.sock: object = None  # the socket the bytes came from
        self.fresh = False  # this readable event has not read from the socket yet

    def drop(self) -> None:
        self.data = b""
        self.pos = 0


def installed(client: Any) -> bool:
    """True if ``client`` reads its socket a block at a time."""
    return bool(getattr(client, _MARK, False))


def held(client: Any) -> int:
    """Bytes read from the socket that paho has not taken yet (0 whenever paho waits for
    input; for tests and troubleshooting)."""
    block: _Block | None = getattr(client, _MARK + "_block", None)
    return 0 if block is None else len(block.data) - block.pos


def block_reads(client: Any) -> tuple[Callable[[], Any], Callable[[Any], Any]] | None:
    """For a client that reads a block at a time: (read one block of a plain socket and
    its packets, returning paho's error code instead of acting on it; paho's handling of
    such a code, the drop included), so that another thread can read while paho's own
    waits and paho's thread can still act on what that read met. None otherwise."""
    steps: tuple[Callable[[], Any], Callable[[Any], Any]] | None = getattr(
        client, _MARK + "_steps", None)
    return steps


def install(client: Any) -> bool:
    """Read ``client``'s socket a block at a time (see the module). False, with paho's
    reads left in place, if this paho has no such steps."""
    sock_recv = getattr(client, "_sock_recv", None)
    packet_read = getattr(client, "_packet_read", None)
    loop_read = getattr(client, "loop_read", None)
    rc_handle = getattr(client, "_loop_rc_handle", None)
    if (not callable(sock_recv) or not callable(packet_read) or not callable(loop_read)
            or not callable(rc_handle) or not hasattr(client, "_sock")):
        return False
    from paho.mqtt.enums import MQTTErrorCode

    success = MQTTErrorCode.MQTT_ERR_SUCCESS
    again = MQTTErrorCode.MQTT_ERR_AGAIN
    no_conn = MQTTErrorCode.MQTT_ERR_NO_CONN
    plain = socket.socket
    block = _Block()

    def read(bufsize: int) -> bytes:
        pos = block.pos
        data = block.data
        if pos < len(data):
            end = pos + bufsize
            if end >= len(data):
                block.drop()  # the rest of the block, which is let go
                return data[pos:] if pos else data
            block.pos = end
            return data[pos:end]
        sock = client._sock
        if type(sock) is not plain:
            return sock_recv(bufsize)  # type: ignore[no-any-return]
        if not block.fresh:
            raise BlockingIOError  # this event's block is used up: back to paho's loop
        block.fresh = False
        data = sock.recv(BLOCK)  # errors and end of stream reach paho as from its recv
        if len(data) <= bufsize:
            return data  # the block stays empty: nothing is kept
        block.data, block.pos, block.sock = data, bufsize, sock
        return data[:bufsize]

    def read_block() -> Any:
        """One block of a plain socket and every packet it completes; paho's error code
        (> 0) for the caller to hand to paho's handling (:func:`block_reads`)."""
        sock = client._sock
        if sock is None:
            return no_conn
        if block.sock is not sock:
            block.drop()  # bytes of an earlier connection
        block.fresh = True
        while True:
            if client._sock is None:
                block.drop()
                return no_conn
            rc = packet_read()
            if rc > 0:
                block.drop()
                return rc
            if rc == again and block.pos >= len(block.data):
                return success

    def read_packets(max_packets: int = 1) -> Any:
        """paho's ``loop_read``; ``max_packets`` is ignored: every packet of the block
        is handled."""
        sock = client._sock
        if sock is not None and type(sock) is not plain:
            return loop_read(max_packets)
        rc = read_block()
        return rc_handle(rc) if rc > 0 else rc

    client._sock_recv = read
    client.loop_read = read_packets
    setattr(client, _MARK + "_block", block)
    setattr(client, _MARK + "_steps", (read_block, rc_handle))
    setattr(client, _MARK, True)
    return True
