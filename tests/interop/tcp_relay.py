"""A loopback TCP relay in front of a broker's port that a test can sever.

Why: failover over TLS on a real broker without restarting it (RabbitMQ and ActiveMQ
take seconds to start). The client connects to the relay; :meth:`Relay.sever` closes
every connection relayed so far, both sides, so the client sees its TLS connection die
(an end of stream without TLS's close_notify, as when a broker's host goes away) and the
broker sees the client gone (it takes back what was not acknowledged). The relay keeps
listening: the client's reconnect is a new TCP connection and a new TLS handshake
through it, to the same broker. Bytes pass through unread: TLS runs end to end.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Relay", "relay"]

_CHUNK = 65536


class Relay:
    """Listens on 127.0.0.1:``port`` (chosen by the system) and relays each accepted
    connection to ``target``; see the module."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self.accepted = 0  #: connections relayed so far
        #: set: each new connection is closed at once (the broker's host "down"), so a
        #: reconnect keeps failing until a test clears it
        self.refusing = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="tcp-relay", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed: the test is over
            if self.refusing.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()  # the broker refused: so does the relay
                continue
            with self._lock:
                self._open += [client, upstream]
                self.accepted += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(_CHUNK):
                dst.sendall(data)
        except OSError:
            pass  # severed, or the other side went away
        with self._lock:  # one side ended: so does the other, and the pair is gone
            for sock in (src, dst):
                if sock in self._open:
                    self._open.remove(sock)
        for sock in (src, dst):
            _close(sock)

    def sever(self) -> int:
        """Close every open relayed connection (both sides); returns how many."""
        with self._lock:
            doomed, self._open = self._open, []
        for sock in doomed:
            _close(sock)
        return len(doomed) // 2

    def close(self) -> None:
        self._listener.close()
        self.sever()


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)  # wakes a pump blocked in recv on it
    except OSError:
        pass  # not connected any more
    sock.close()


@contextmanager
def relay(host: str, port: int) -> Iterator[Relay]:
    """A :class:`Relay` to ``host:port`` until the block ends."""
    r = Relay((host, port))
    try:
        yield r
    finally:
        r.close()
