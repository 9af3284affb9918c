"""The TLS listener of the STOMP server: the handshake first, then an ordinary connection.

``create_server(ssl=...)`` would be shorter, but asyncio (and uvloop) drop a failed
handshake without a word outside debug mode, and run it before the protocol exists, so
a plain-text client on the TLS port, an untrusted client certificate or a scanner would
leave no trace. Here each accepted socket gets a :class:`_Gate`, which runs
``loop.start_tls`` itself: a failure is logged (one line, ``jmspy.broker.tls``) and the
socket closed while the broker goes on serving; a success makes the STOMP connection
(:meth:`StompServer.protocol`) with the user the client certificate names, if the
listener takes certificates as identities.

The STOMP connection then reads and writes through the TLS transport like through a
plain one: flow control (``pause_reading``, write-buffer limits) is the transport's
interface, and the server has no raw-socket path that could bypass the encryption.
Handshakes in progress count against ``max-connections`` (they are not connections yet,
but each holds a socket) and last at most the connect timeout.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import cast

from ...tls_config import cert_user

__all__ = ["TlsListener"]

log = logging.getLogger("jmspy.broker.tls")

#: asyncio's own limit, for a server whose connect timeout is off (0)
_DEFAULT_HANDSHAKE_S = 60.0


class TlsListener:
    """What a TLS port serves with: the context, whose certificates are identities, and
    the handshakes under way (closed with the server)."""

    def __init__(self, context: ssl.SSLContext, *, user_from_cert: str | None = None,
                 handshake_timeout: float = 0, max_handshakes: int = 0) -> None:
        self.context = context
        #: a subject field (tls_config.CERT_FIELDS) naming the user; None: passwords only
        self.user_from_cert = user_from_cert
        self.handshake_timeout = handshake_timeout or _DEFAULT_HANDSHAKE_S
        self.max_handshakes = max_handshakes
        self._pending: set[asyncio.Transport] = set()

    def factory(self, make: Callable[[str | None], asyncio.Protocol]) -> Callable[[], _Gate]:
        """The protocol factory for ``create_server``: ``make(user)`` is called once the
        handshake succeeded, with the certificate's user (None: log in by password)."""
        return lambda: _Gate(self, make)

    def abort_handshakes(self) -> None:
        """The server stops: drop the sockets still negotiating."""
        for transport in list(self._pending):
            transport.abort()
        self._pending.clear()

    @property
    def pending(self) -> int:
        """Handshakes under way."""
        return len(self._pending)

    def admit(self, transport: asyncio.Transport) -> bool:
        """Count a new socket's handshake; False when ``max_handshakes`` are under way."""
        if self.max_handshakes and len(self._pending) >= self.max_handshakes:
            return False
        self._pending.add(transport)
        return True

    def done(self, transport: asyncio.Transport) -> None:
        """The socket's handshake ended (either way)."""
        self._pending.discard(transport)


class _Early(asyncio.Protocol):
    """Holds what the TLS transport delivers between the end of the handshake and the
    moment the STOMP connection takes over: asyncio reads the first records (a TLS 1.3
    client's CONNECT may travel with its Finished) before ``start_tls`` returns."""

    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.eof = False
        self.lost: tuple[Exception | None] | None = None

    def data_received(self, data: bytes) -> None:
        self.data.append(data)

    def eof_received(self) -> bool:
        self.eof = True
        return True  # the connection decides once it is there

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = (exc,)


class _Gate(asyncio.Protocol):
    """An accepted socket whose TLS handshake is under way."""

    def __init__(self, listener: TlsListener,
                 make: Callable[[str | None], asyncio.Protocol]) -> None:
        self._listener = listener
        self._make = make
        self._peer = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        raw = cast(asyncio.Transport, transport)
        peer = raw.get_extra_info("peername")
        self._peer = (f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2
                      else str(peer))
        if not self._listener.admit(raw):
            log.warning("refusing TLS client %s: %d handshakes already under way "
                        "([limits] max-connections)", self._peer, self._listener.pending)
            raw.abort()
            return
        raw.pause_reading()  # the handshake reads, once start_tls has the socket
        asyncio.get_running_loop().create_task(self._handshake(raw))

    async def _handshake(self, raw: asyncio.Transport) -> None:
        listener = self._listener
        early = _Early()
        try:
            tls = await asyncio.get_running_loop().start_tls(
                raw, early, listener.context, server_side=True,
                ssl_handshake_timeout=listener.handshake_timeout)
        except (OSError, ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
            log.warning("TLS handshake with %s failed, connection dropped: %s", self._peer,
                        _why(exc, listener.handshake_timeout))
            raw.abort()
            return
        finally:
            listener.done(raw)
        if tls is None:  # the peer went away as the handshake ended
            raw.abort()
            return
        user = None
        if listener.user_from_cert is not None:
            user = cert_user(tls.get_extra_info("peercert"), listener.user_from_cert)
        conn = self._make(user)
        tls.set_protocol(conn)
        conn.connection_made(tls)
        for data in early.data:
            conn.data_received(data)
        if early.eof and not conn.eof_received():
            tls.close()
        if early.lost is not None:
            conn.connection_lost(early.lost[0])

    def connection_lost(self, exc: Exception | None) -> None:
        """The socket closed before ``start_tls`` took it: nothing to undo."""


def _why(exc: BaseException, timeout: float) -> str:
    """One line for the log: the OpenSSL reason (a plain-text client's bytes read as
    "wrong version number" or "http request"), or the timeout."""
    if isinstance(exc, TimeoutError):
        return f"no handshake completed within {timeout:g} s"
    if isinstance(exc, ssl.SSLError) and exc.reason:
        hint = ""
        if exc.reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL"):
            hint = " (a client speaking plain text to the TLS port?)"
        elif "CERTIFICATE" in exc.reason:
            hint = " (the client's certificate is missing or not signed by [broker.tls] ca)"
        return f"{exc.reason}{hint}"
    return str(exc) or type(exc).__name__
