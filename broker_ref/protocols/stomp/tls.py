"""The TLS listener of the STOMP server: the handshake first, then an ordinary connection.

``create_server(ssl=...)`` would be shorter, but asyncio and uvloop both drop a failed
handshake without a word outside debug mode, so a plain-text client on the TLS port, an
untrusted client certificate or a scanner would leave no trace. Here the listener
accepts each socket itself and hands it to ``loop.connect_accepted_socket`` with the
context: a failed or timed-out handshake raises there, is logged (one line,
``jmspy.broker.tls``, naming the peer and OpenSSL's reason) and the socket is closed
while the broker goes on serving. A completed one calls the STOMP connection's
``connection_made`` with the TLS transport, as a plain listener does with a plain one.

The STOMP connection then reads and writes through the TLS transport like through a
plain one: flow control (``pause_reading``, write-buffer limits) is the transport's
interface, and the server has no raw-socket path that could bypass the encryption.
Handshakes in progress count against ``max-connections`` (they are not connections yet,
but each holds a socket) and last at most the connect timeout.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable

__all__ = ["TlsListener"]

log = logging.getLogger("jmspy.broker.tls")

#: asyncio's own limit, for a server whose connect timeout is off (0)
_DEFAULT_HANDSHAKE_S = 60.0
#: OpenSSL's reasons when a ClientHello is not what arrived: STOMP's CONNECT reads as an
#: HTTP proxy request, other text as an HTTP request or a wrong record version
_PLAIN_TEXT = frozenset({"WRONG_VERSION_NUMBER", "HTTP_REQUEST", "HTTPS_PROXY_REQUEST",
                         "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE"})


class TlsListener:
    """What a TLS port serves with (the context, whose certificates are identities), and,
    once :meth:`listen` ran, the listening socket, its accept loop and its handshakes."""

    def __init__(self, context: ssl.SSLContext, *, user_from_cert: str | None = None,
                 handshake_timeout: float = 0, max_handshakes: int = 0) -> None:
        self.context = context
        #: a subject field (tls_config.CERT_FIELDS) naming the user; None: passwords only
        self.user_from_cert = user_from_cert
        self.handshake_timeout = handshake_timeout or _DEFAULT_HANDSHAKE_S
        self.max_handshakes = max_handshakes
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        #: handshake tasks, held so that none is collected half-way
        self._pending: set[asyncio.Task[None]] = set()
        #: the TLS transports of established connections: a TLS close waits for the
        #: client's close_notify, which a stopping server does not wait for (a plain set:
        #: uvloop's transports take no weak references; closed ones are pruned as it grows)
        self._open: set[asyncio.Transport] = set()
        self._prune_at = 64
        self._closed = asyncio.Event()

    async def listen(self, host: str, port: int,
                     factory: Callable[[], asyncio.Protocol]) -> tuple[str, int]:
        """Bind ``host:port`` (0: a free port) and accept until :meth:`close`; each
        client gets ``factory()``'s protocol once its handshake completed."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=1024)
        sock.setblocking(False)
        self._sock = sock
        self._accepting = asyncio.get_running_loop().create_task(self._accept(sock, factory))
        addr = sock.getsockname()
        return str(addr[0]), int(addr[1])

    async def _accept(self, sock: socket.socket,
                      factory: Callable[[], asyncio.Protocol]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, peer = await loop.sock_accept(sock)
            except OSError as exc:  # out of descriptors, say: the next accept may work
                if self._sock is None:
                    return
                log.warning("TLS listener: accept failed: %s", exc)
                await asyncio.sleep(0.1)  # lets the descriptors in use be closed
                continue
            where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
            if self.max_handshakes and len(self._pending) >= self.max_handshakes:
                log.warning("refusing TLS client %s: %d handshakes already under way "
                            "([limits] max-connections)", where, len(self._pending))
                client.close()
                continue
            task = loop.create_task(self._handshake(client, where, factory))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _handshake(self, client: socket.socket, where: str,
                         factory: Callable[[], asyncio.Protocol]) -> None:
        try:
            transport, _ = await asyncio.get_running_loop().connect_accepted_socket(
                factory, client, ssl=self.context,
                ssl_handshake_timeout=self.handshake_timeout)
        except (OSError, ConnectionError, TimeoutError, ValueError) as exc:
            log.warning("TLS handshake with %s failed, connection dropped: %s", where,
                        _why(exc, self.handshake_timeout))
            client.close()
            return
        self._open.add(transport)
        if len(self._open) >= self._prune_at:
            self._open = {t for t in self._open if not t.is_closing()}
            self._prune_at = max(64, 2 * len(self._open))

    def close(self) -> None:
        """Stop accepting (the connections stay until :meth:`abort_sockets`)."""
        sock, self._sock = self._sock, None
        if self._accepting is not None:
            self._accepting.cancel()
        if sock is not None:
            sock.close()
        self._closed.set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def abort_sockets(self) -> None:
        """The server stops (its connections were closed, their last frames written):
        drop the handshakes under way and the TLS closes still waiting for the client."""
        for task in list(self._pending):
            task.cancel()
        for transport in list(self._open):
            transport.abort()
        self._open.clear()


def _why(exc: BaseException, timeout: float) -> str:
    """One line for the log: the OpenSSL reason (a plain-text client's bytes read as
    "wrong version number" or "http request"), or the timeout."""
    if isinstance(exc, TimeoutError) or "taking longer than" in str(exc):
        return f"no handshake completed within {timeout:g} s"
    if isinstance(exc, ssl.SSLError) and exc.reason:
        hint = ""
        if exc.reason in _PLAIN_TEXT:
            hint = " (a client speaking plain text to the TLS port?)"
        elif "_ALERT_" in exc.reason:  # the client's own verdict, sent as an alert
            hint = (" (sent by the client: it does not accept the broker's certificate; does "
                    "it trust the CA that signed [broker.tls] cert, for the name it dials?)")
        elif "CERTIFICATE" in exc.reason:
            hint = " (the client's certificate is missing or not signed by [broker.tls] ca)"
        return f"{exc.reason}{hint}"
    return str(exc) or type(exc).__name__
