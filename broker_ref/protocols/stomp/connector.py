"""A STOMP listener for an in-process broker: ActiveMQ's embedded broker with a connector.

An application that embeds the broker (``vm://NAME``) sometimes needs other processes to
reach it: a Spark job reading its queues, a ``jmspy stat``, a stomp.py script. ActiveMQ's
answer is ``BrokerService.addConnector("tcp://...")`` beside its ``vm://`` transport; ours
is :meth:`jmspy.transports.vm_host.BrokerHost.add_connector`, which runs one of these.

The connector is an ordinary :class:`StompServer` on an event loop in its own thread. The
broker core stays single-threaded in effect: the server holds the in-process broker's
lock around every call into the core, as each ``vm://`` call does, and a delivery that a
``vm://`` thread frees for a STOMP client is handed to the loop thread-safely. The server
leaves the broker open when it stops: the broker's owner closes it.
"""

from __future__ import annotations

import ssl
from contextlib import AbstractContextManager
from typing import Any

from jmspy.errors import InvalidConfigurationException
from jmspy.stomp_frames import CodecLimits

from ...core import Broker
from ...tls_config import CERT_FIELDS
from ..loop_thread import LoopThread, listener_url
from .server import ConnectionLimits, StompServer
from .tls import TlsListener

__all__ = ["TLS_SCHEMES", "StompConnector", "connector_tls"]


class StompConnector:
    """Serves STOMP for a broker that others also call, from a thread of its own."""

    def __init__(
        self,
        broker: Broker,
        core_lock: AbstractContextManager[object],
        *,
        name: str = "jmspy",
        limits: CodecLimits | None = None,
        heartbeat_ms: int = 10_000,
        connection_limits: ConnectionLimits | None = None,
    ) -> None:
        self._broker = broker
        self._core_lock = core_lock
        self._options: dict[str, Any] = dict(
            limits=limits, heartbeat_ms=heartbeat_ms, connection_limits=connection_limits)
        self._server: StompServer | None = None
        self._loop = LoopThread(f"jmspy-connector-{name}")
        #: the bound address, once :meth:`start` returned
        self.address: tuple[str, int] | None = None
        self._scheme = "stomp"

    @property
    def url(self) -> str:
        """``stomp://HOST:PORT`` (``stomp+ssl://`` for a TLS listener) of the bound
        address, for other processes to connect to."""
        assert self.address is not None, "start() first"
        return listener_url(self._scheme, self.address)

    def start(self, host: str, port: int, *, tls: TlsListener | None = None) -> tuple[str, int]:
        """Listen on ``host:port`` (0: any free port), over TLS with ``tls``; the bound
        address. A port that cannot be bound raises the OSError, and no thread is left
        behind."""

        async def listen() -> tuple[str, int]:
            self._server = StompServer(
                self._broker, core_lock=self._core_lock, owns_broker=False, **self._options)
            return await self._server.start(host, port, tls=tls)

        if tls is not None:
            self._scheme = "stomp+ssl"
        self.address = self._loop.start_with(listen(), 30.0)
        return self.address

    def stop(self) -> None:
        """Close the listener and every STOMP connection (their unacknowledged messages
        go back to their queues); the broker stays open. Call it without the broker's
        lock held: the loop needs that lock to close its connections."""
        server = self._server
        if server is not None and self._loop.alive:
            self._server = None
            self._loop.run(server.stop(), 30.0)
        self._loop.halt()


#: connector schemes served over TLS (``stomps`` as the client's alias)
TLS_SCHEMES = ("stomp+ssl", "stomps")


def connector_tls(url: str, scheme: str, context: ssl.SSLContext | None,
                   user_from_cert: str | None) -> TlsListener | None:
    """The TLS listener an ``add_connector`` URL asks for (None: plain STOMP); a TLS
    scheme without a context, or a context for plain STOMP, is refused."""
    if scheme not in TLS_SCHEMES:
        if context is not None or user_from_cert is not None:
            raise InvalidConfigurationException(
                f"connector {url!r}: ssl_context and user_from_cert serve TLS; write "
                "stomp+ssl://HOST:PORT to listen over TLS")
        return None
    if context is None:
        raise InvalidConfigurationException(
            f"connector {url!r}: a TLS connector needs ssl_context=, a server-side "
            "ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER) holding the broker's certificate and "
            "key (context.load_cert_chain(cert, key))")
    if user_from_cert is not None and user_from_cert not in CERT_FIELDS:
        raise InvalidConfigurationException(
            f"connector {url!r}: user_from_cert={user_from_cert!r} is not a subject field "
            f"the broker reads; use one of {', '.join(CERT_FIELDS)}")
    return TlsListener(context, user_from_cert=user_from_cert)
