"""asyncio host of the MQTT sessions: one protocol object per socket, a timer for
keep-alive and the hub's due work (delayed wills, session expiry).

Every call into the core happens on the loop's thread, holding ``core_lock`` (a
``vm://`` broker's lock when the server is its connector: :mod:`.connector`). No output
leaves before the store has committed what the turn wrote (:mod:`..durability`): a PUBACK
promises its message, a SUBACK its persistent subscription, as a STOMP RECEIPT does. A socket
that congests stops settling QoS 0 deliveries (``written``), so credit stops and at most
a window per subscription waits in its buffer; a session whose PUBLISHes producer flow
control holds is not read until they went through.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, cast

from ...core import Broker
from ...core.listener_stats import Closed
from ...core.throttle import LoginThrottle
from ...tls_config import cert_user
from ..connection_limits import Admission, ConnectionLimits
from ..durability import make_durable
from ..lingering import end_after_linger
from ..logins import LoginRefused, Logins
from .connect import ConnectRequest
from .hub import MqttHub
from .session import MAX_PACKET_BYTES, MqttSession

if TYPE_CHECKING:  # the listener is the STOMP host's, passed in (runner.py)
    from ..stomp.tls import TlsListener

__all__ = ["MqttConnection", "MqttServer"]

log = logging.getLogger("jmspy.broker.mqtt")

#: seconds between keep-alive checks
TICK_S = 0.5


class MqttConnection(asyncio.Protocol):
    """One client socket: bytes to the session, its output to the socket."""

    def __init__(self, server: MqttServer, user_from_cert: str | None = None) -> None:
        self.server = server
        self.session = MqttSession(server.broker, server.hub,
                                   max_packet_bytes=server.max_packet_bytes,
                                   max_keep_alive=server.max_keep_alive)
        self.session.wakeup = self._wakeup
        self.session.defer_login = True  # credentials are checked off the loop (logins)
        #: a subject field of the client certificate that names the user (TLS only)
        self._user_from_cert = user_from_cert
        #: the user the client's verified certificate names, when it logs in by it
        self.certificate_user: str | None = None
        self._logging_in = False
        #: a group commit lost messages this connection sent: why (see store_refused)
        self._store_refusal: str | None = None
        self.transport: asyncio.Transport | None = None
        self._congested = False
        self._paused_reading = False
        self._flush_due = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.address: str | None = peer[0] if isinstance(peer, tuple) else None
        self.opened_at = self.server.broker.now()
        if self._user_from_cert is not None:
            self.certificate_user = cert_user(transport.get_extra_info("peercert"),
                                              self._user_from_cert)
        refusal = self.server.admit(self)
        if refusal is not None:  # MQTT has nothing to say before CONNECT: the socket closes
            log.warning("MQTT connection from %s refused: %s", self.address, refusal)
            self.transport.close()
            self.transport = None

    def data_received(self, data: bytes) -> None:
        with self.server.core_lock:
            self._writing()
            try:
                self.session.receive_data(data)
            except Exception:
                log.exception("internal error in an MQTT session; closing it")
                self.session.connection_lost()
            if self.session.login_request is not None and not self._logging_in:
                self._logging_in = True
                self.server.loop.create_task(self._login(self.session.login_request))
            self.flush()

    async def _login(self, request: ConnectRequest) -> None:
        """Check the CONNECT's credentials (the throttle, then the certificate's user or
        the password on the login thread); reading waits meanwhile (``reading_held``)."""
        server = self.server
        try:
            principal = await server.logins.check(self.address, request.user,
                                                  request.password, self.certificate_user)
        except LoginRefused as no:
            with server.core_lock:
                log.warning("MQTT client %s refused: %s", self.address, no.detail)
                self.session.login_refused(no.throttled, no.message)
                self.flush()
            return
        with server.core_lock:
            self._writing()
            self.session.login_done(principal)
            self.flush()

    def _writing(self) -> None:
        store = self.server.broker.store
        if store is not None:
            store.writer = self  # a failed group commit names whose messages it lost

    def store_refused(self, why: str) -> None:
        """A group commit lost messages this connection sent since its last PUBACK
        (:mod:`..durability`): the next flush writes none of the acknowledgements waiting
        and ends the connection (v5: DISCONNECT 0x80 saying why), so the client sends
        them again, as a QoS 1/2 client does for what it has no PUBACK/PUBREC of."""
        self._store_refusal = why
        self._wakeup()

    def _wakeup(self) -> None:
        if not self._flush_due:
            self._flush_due = True
            self.server.call_soon(self._flush_locked)

    def _flush_locked(self) -> None:
        with self.server.core_lock:
            self.flush()

    def flush(self) -> None:
        """Write the session's output; settle QoS 0 deliveries unless congested."""
        self._flush_due = False
        transport, session = self.transport, self.session
        if transport is None:
            return
        if session.input_waiting and not session.reading_held:
            session.receive_data(b"")  # what waited behind a held PUBLISH, in order
        for _ in range(64):
            data = session.data_to_send()
            if data:
                self.server.make_durable()  # what the output promises is on disk first
            if self._store_refusal is not None:
                why, self._store_refusal = self._store_refusal, None
                log.error("MQTT client %s disconnected: %s", self.address, why)
                # a full disk is a quota (0x97), as when the PUBLISH itself is refused
                full = getattr(self.server.broker.store, "out_of_space", False)
                session.close_by_operator(f"message not stored: {why}; send it again once "
                                          "the broker stores again", 0x97 if full else 0x80)
                data = session.data_to_send()  # the DISCONNECT alone, no acknowledgement
            if data:
                transport.write(data)
            if self._congested or session.closing:
                break
            session.written()
            if not session.has_output():
                break
        if session.closing:  # the DISCONNECT (or refusing CONNACK) must not meet a RST
            end_after_linger(transport, self.server.lingering, self.server.loop)
            self.transport = None
            return
        held = session.reading_held
        if held and not self._paused_reading:
            transport.pause_reading()
            self._paused_reading = True
        elif not held and self._paused_reading:
            transport.resume_reading()
            self._paused_reading = False

    def pause_writing(self) -> None:
        self._congested = True

    def resume_writing(self) -> None:
        self._congested = False
        self._wakeup()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.server.release(self)
        with self.server.core_lock:
            self.session.connection_lost()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None


class MqttServer:
    """Serves MQTT for one :class:`Broker` on the running event loop."""

    def __init__(self, broker: Broker, *, hub: MqttHub | None = None,
                 core_lock: AbstractContextManager[object] | None = None,
                 max_packet_bytes: int = MAX_PACKET_BYTES, max_keep_alive: int = 0,
                 limits: ConnectionLimits | None = None, logins: Logins | None = None,
                 durable: Callable[[], None] | None = None) -> None:
        self.broker = broker
        #: commits the store before output (the STOMP listener's in ``jmspy broker``, so
        #: one group commit covers both protocols and an unusable store stops both)
        self.make_durable: Callable[[], None] = durable or self._make_durable
        self.hub = hub or MqttHub(broker)
        self.max_keep_alive = max_keep_alive
        #: [limits] as on the STOMP listener: max-connections and the per-address cap
        #: (counted over this server's MQTT connections), connect-timeout for CONNECT
        self.limits = limits or ConnectionLimits()
        self._admission: Admission[MqttConnection] = Admission(
            self.limits, broker.listeners, "MQTT connections")
        self.core_lock: AbstractContextManager[object] = core_lock or nullcontext()
        #: the credential checks: the STOMP listener's in ``jmspy broker`` (one throttle
        #: for both protocols), else this server's own, with [limits]' throttle
        self.logins = logins or Logins(
            broker, LoginThrottle(self.limits.throttle, broker.now), core_lock)
        self._own_logins = logins is None
        self.max_packet_bytes = max_packet_bytes
        self.loop = asyncio.get_running_loop()
        self.call_soon: Any = (self.loop.call_soon if core_lock is None
                               else self.loop.call_soon_threadsafe)
        self.connections = self._admission.connections
        self._servers: list[asyncio.Server | TlsListener] = []
        #: closed connections' sockets still read for a while (..lingering)
        self.lingering: set[asyncio.Transport] = set()
        self._tls: list[TlsListener] = []
        self._tick: asyncio.TimerHandle | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 1883, *,
                    tls: TlsListener | None = None) -> tuple[str, int]:
        """Listen (again for each listener: plain, or MQTT over TLS with ``tls``, the
        STOMP host's TLS listener: the handshake done before a session starts); returns
        the bound (host, port) (port 0: a free one)."""
        if tls is not None:
            self._servers.append(tls)
            self._tls.append(tls)
            bound = await tls.listen(host, port,
                                     lambda: MqttConnection(self, tls.user_from_cert))
            self._start_tick()
            return bound
        server = await self.loop.create_server(lambda: MqttConnection(self), host, port,
                                               reuse_address=True, backlog=1024)
        self._servers.append(server)
        self._start_tick()
        addr = server.sockets[0].getsockname()
        return str(addr[0]), int(addr[1])

    def _make_durable(self) -> None:
        unusable = make_durable(self.broker.store)  # refusals: MqttConnection.store_refused
        if unusable is not None and self._servers:
            log.critical("MQTT listener stopping: %s", unusable)
            for server in self._servers:
                server.close()
            self._servers = []
            for conn in list(self.connections):
                conn.store_refused(unusable)

    def admit(self, conn: MqttConnection) -> str | None:
        """Count a new connection in, or say why it may not come in (and count that)."""
        return self._admission.admit(conn)

    def release(self, conn: MqttConnection) -> None:
        self._admission.release(conn)

    def _start_tick(self) -> None:
        if self._tick is None:
            self._tick = self.loop.call_later(TICK_S, self._on_tick)

    def _on_tick(self) -> None:
        self._tick = None
        with self.core_lock:
            if self.broker.closed:
                return
            now = self.broker.now()
            deadline = now - int(self.limits.connect_timeout * 1000)
            for conn in list(self.connections):
                session = conn.session
                if (self.limits.connect_timeout and not session.connected
                        and not session.closing and conn.opened_at < deadline):
                    # no CONNECT in time (a half-open or idle socket): nothing to answer
                    self.broker.listeners.close(Closed.CONNECT_TIMEOUT)
                    session.connection_lost()
                    conn.flush()
                elif session.check_keep_alive(now):
                    conn.flush()
            try:
                self.hub.process(now)
            except Exception:
                log.exception("MQTT hub processing failed")
        self._tick = self.loop.call_later(TICK_S, self._on_tick)

    def close_connection(self, core: object, reason: str) -> bool:
        """End the client connection whose core connection is ``core`` (its session is
        the core connection's callback), its client told why; False when no connection
        of this server has it (the management API's close)."""
        for conn in list(self.connections):
            if conn.session is getattr(core, "callback", None):
                conn.session.close_by_operator(reason)
                conn.flush()  # the DISCONNECT goes out, then the socket closes
                return True
        return False

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        with self.core_lock:
            for conn in list(self.connections):
                conn.flush()
                conn.close()
                conn.session.connection_lost()
            for tls in self._tls:
                tls.abort_sockets()
            for transport in list(self.lingering):
                transport.abort()
            self.lingering.clear()
        for server in self._servers:
            await server.wait_closed()
        if self._own_logins:
            self.logins.close()
