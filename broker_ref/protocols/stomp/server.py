"""asyncio host of the STOMP sessions: sockets, heart-beats, back-pressure, timers.

Every call into the broker core happens on the event loop's thread (protocol callbacks
and loop timers), so the single-threaded core needs no lock. Each TCP connection is one
:class:`asyncio.Protocol` driving one sans-I/O :class:`StompSession`; a callback-based
protocol rather than a reader task per connection, because bytes go straight from
``data_received`` into the parser with no task switch per read. Any exception while
serving one connection closes that connection only.

No client can take the loop from the others (:class:`ConnectionLimits`): a connection
must finish CONNECT within ``connect_timeout``; connections are capped in total and per
source address; passwords are checked on a worker thread (hashing is slow on purpose)
while the connection stops being read, and failed logins are throttled per address and
per user name (:class:`~jmspy.broker_ref.core.throttle.LoginThrottle`).

Fair turns: one ``data_received`` (or one loop callback after it) acts on a bounded batch
of a client's frames (:data:`~.protocol.TURN_FRAMES`, ``TURN_SECONDS``); while the rest
waits in its parser, that socket is not read, and the rest is taken on later loop turns,
after the other connections' reads, and after the flushes (commit, RECEIPTs) those reads
are owed. So a client flooding persistent SENDs delays another client's round trip by
about one batch, not by its whole flood (uvloop reads a busy socket up to 32 times per
turn otherwise).

Back-pressure: the transport's write buffer has a high-water mark. Above it the session
stops granting credit (so no new deliveries are produced for that client) and the socket
stops being read (so a client that floods SENDs without reading its receipts cannot grow
our buffer either); below the low-water mark both resume. Memory per slow client is
bounded by its credit windows plus the high-water mark.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import wraps
from typing import Concatenate, ParamSpec, TypeVar, cast

from jmspy.stomp_frames import CodecLimits

from ...core import Broker, BrokerError
from ...core.throttle import LoginThrottle, ThrottleSettings
from .connect import LoginRequest
from .loop_polling import LoopPolling
from .protocol import TURN_FRAMES, StompSession

__all__ = ["HIGH_WATER", "ConnectionLimits", "StompServer"]


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Per-server limits on connections (the ``[limits]`` keys in kebab-case).

    ``connect_timeout`` (s, 0 = none): RabbitMQ's handshake timeout is 10 s.
    ``max_connections``: ActiveMQ's transport connector default, 1000 (0 = no cap).
    ``max_connections_per_address`` (0 = no cap): off by default, since many clients can
    share one address (NAT, a local test suite); set it where they do not.
    """

    connect_timeout: float = 10.0
    max_connections: int = 1000
    max_connections_per_address: int = 0
    throttle: ThrottleSettings = field(default_factory=ThrottleSettings)

log = logging.getLogger("jmspy.broker_ref.stomp")

HIGH_WATER = 256 * 1024
_EOL = b"\n"

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _holding_core(
    method: Callable[Concatenate[_Connection, _P], _R],
) -> Callable[Concatenate[_Connection, _P], _R]:
    """Run a loop callback of a connection with the server's ``core_lock`` held.

    A plain ``jmspy broker`` has nothing to hold (the loop is the core's only thread); a
    connector of an in-process broker shares that broker's lock with its ``vm://``
    connections (:mod:`.connector`). Callbacks nest (``flush`` writes, the write calls
    ``pause_writing``), so the lock is re-entrant there.
    """

    @wraps(method)
    def run(self: _Connection, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        server = self.server
        if not server.shares_core:  # nothing to hold: skip the empty context manager
            return method(self, *args, **kwargs)
        with server.core_lock:
            return method(self, *args, **kwargs)

    return run


class _Connection(asyncio.Protocol):
    """One TCP connection: bytes in -> session -> bytes out, plus heart-beat timers."""

    def __init__(self, server: StompServer) -> None:
        self.server = server
        self.loop = server.loop
        self.session = StompSession(
            server.broker, limits=server.limits, heartbeat_ms=server.heartbeat_ms
        )
        self.transport: asyncio.Transport | None = None
        self.last_recv = self.loop.time()
        self.last_send = self.last_recv
        self._hb_handle: asyncio.TimerHandle | None = None
        self._flush_scheduled = False
        self._closed = False
        self._reading_paused = False
        #: reading stopped by producer flow control (the session holds too many of this
        #: client's sends without receipts); independent of the write back-pressure pause
        self._held_paused = False
        self.session.wakeup = self._wakeup
        self.session.defer_login = True  # passwords are hashed off the loop (_login)
        self.session.turn_frames = TURN_FRAMES  # fair turns (the module docstring)
        self.session.turn_clock = time.perf_counter
        #: not read while frames it sent wait in the session for a later turn (fair turns)
        self._turn_paused = False
        self._turn_scheduled = False
        self.address: str | None = None
        self._connect_timer: asyncio.TimerHandle | None = None
        self._received_any = False

    def _wakeup(self) -> None:
        """The session has new output produced by another connection's call or a timer:
        written when that connection's ``data_received`` ends, else by a flush callback
        (:meth:`StompServer.schedule_flush`)."""
        if not self._flush_scheduled and not self._closed:
            self._flush_scheduled = True
            self.server.schedule_flush(self)

    # -- asyncio.Protocol -----------------------------------------------------------------

    @_holding_core
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a cast, not an isinstance check: uvloop's transports implement the interface
        # without subclassing asyncio.Transport
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=HIGH_WATER, low=HIGH_WATER // 4)
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else None
        refusal = self.server.admit(self)
        if refusal is not None:
            self._refuse("too many connections", refusal)
            return
        timeout = self.server.connection_limits.connect_timeout
        if timeout > 0:
            self._connect_timer = self.loop.call_later(timeout, self._connect_timed_out)

    def _refuse(self, message: str, detail: str) -> None:
        log.warning("refusing STOMP client %s: %s", self.address, detail)
        self._guard(lambda: self.session.refuse(message, detail))
        self.flush()
        self.close()

    def _refuse_quietly(self, message: str, detail: str, code: str | None = None) -> None:
        """Like :meth:`_refuse`, for refusals the broker already logs its own way."""
        self._guard(lambda: self.session.refuse(message, detail, code))
        self.flush()
        self.close()

    @_holding_core
    def _connect_timed_out(self) -> None:
        self._connect_timer = None
        if self._closed or self.session.connected:
            return
        timeout = self.server.connection_limits.connect_timeout
        detail = (f"no CONNECT completed within {timeout:g} s of opening the connection "
                  "([limits] connect-timeout); send CONNECT (or STOMP) first")
        if self._received_any:
            self._refuse("CONNECT timeout", detail)
        else:  # a silent socket gets no frame: it may not even be a STOMP client
            log.warning("closing STOMP connection from %s: %s", self.address, detail)
            self.close()

    def _start_login(self, request: LoginRequest) -> None:
        """Check the password on the server's login thread; read nothing meanwhile."""
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        self.loop.create_task(self._login(request))

    async def _login(self, request: LoginRequest) -> None:
        server = self.server
        policy = server.broker.security
        assert policy is not None
        verdict = server.throttle.verdict(self.address, request.user)
        if verdict.refusal is not None:
            with server.core_lock:
                self._refuse("too many failed logins", verdict.refusal)
            return
        if verdict.delay_ms:
            await asyncio.sleep(verdict.delay_ms / 1000)
        try:
            principal = await self.loop.run_in_executor(
                server.login_pool, policy.authenticate, request.user, request.password)
        except BrokerError as exc:
            if request.user or request.password:
                server.throttle.failed(self.address, request.user)
            if not self._closed:
                with server.core_lock:
                    self._refuse_quietly(exc.message.split(";")[0][:200], exc.message,
                                         exc.code)
            return
        server.throttle.succeeded(self.address, request.user)
        if self._closed:
            return
        with server.core_lock:
            self._guard(lambda: self.session.login_done(principal))
            self._after_connect()
            self._after_turn()
            if self._reading_paused and self.transport is not None and not self._closed:
                self._reading_paused = False
                if not self._held_paused:
                    self.transport.resume_reading()
            self.flush()
            server.reschedule_timers()

    def _after_connect(self) -> None:
        if self.session.connected:
            if self._connect_timer is not None:
                self._connect_timer.cancel()
                self._connect_timer = None
            self._schedule_heartbeat()

    def data_received(self, data: bytes) -> None:
        """Act on the frames ``data`` completes (up to a turn's batch), write this
        client's replies, then deliver what its SENDs brought (``Broker.defer_dispatch``):
        a producer waiting for a RECEIPT does not wait for the delivery work as well."""
        self._serve(data)
        self.server.polling.read_served()

    @_holding_core
    def _next_turn(self) -> None:
        """Fair turns: the next batch of the frames this client sent, a loop turn after
        the last one (other connections were read in between). What the connections read
        meanwhile are owed (their commit and RECEIPTs) is written first, not a batch later."""
        self._turn_scheduled = False
        if not self._closed:
            self.server.flush_due()
            self._serve(b"")

    @_holding_core
    def _serve(self, data: bytes) -> None:
        server = self.server
        broker = server.broker
        deferred = broker.defer_dispatch()
        server.open_batch()
        try:
            self._received(data)
        finally:
            if deferred:
                try:
                    broker.dispatch_deferred()
                except Exception:  # a broken queue must not take the event loop with it
                    log.exception("internal error delivering messages; the connection "
                                  "whose SENDs they were is closed")
                    self.close()
            server.flush_woken()

    def _received(self, data: bytes) -> None:
        self.last_recv = self.loop.time()
        self._received_any = True
        session = self.session
        connected = session.connected
        try:
            session.receive_data(data)
        except Exception:
            log.exception("internal error serving a STOMP connection; closing it")
            self.close()
            return
        if not connected and session.connected:
            self._after_connect()
        elif session.login_request is not None and not self._reading_paused:
            self._start_login(session.login_request)
        self._after_turn()
        store = self.server.broker.store
        if store is not None and store.pending:
            # Group commit: other connections' reads of this loop turn go into the same
            # commit, made by the first flush (one fsync for all of them).
            self._wakeup()
        else:
            self.flush()
        self.server.reschedule_timers()

    def _after_turn(self) -> None:
        """Fair turns: while the session has frames left for a later turn this socket is
        not read (what it buffers stays bounded) and the next batch is a loop callback;
        once they are all acted on, reading resumes unless something else holds it."""
        transport = self.transport
        if transport is None or self._closed:
            return
        if self.session.input_waiting:
            self._turn_paused = True
            if transport.is_reading():  # also after another pause's end resumed it
                transport.pause_reading()
            if not self._turn_scheduled:
                self._turn_scheduled = True
                self.loop.call_soon(self._next_turn)
        elif self._turn_paused:
            self._turn_paused = False
            if not (self._reading_paused or self._held_paused):
                transport.resume_reading()

    def eof_received(self) -> bool | None:
        self.close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    @_holding_core
    def pause_writing(self) -> None:
        self.session.pause_credit()
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            if not self._held_paused:
                self.transport.pause_reading()

    @_holding_core
    def resume_writing(self) -> None:
        if self._closed:
            return
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            if not self._held_paused:
                self.transport.resume_reading()
        self.last_recv = self.loop.time()  # we did not read while paused: not silence
        self._guard(self.session.resume_credit)
        self.flush()

    # -- output ---------------------------------------------------------------------------

    @_holding_core
    def flush(self) -> None:
        """Write what the session has; more output produced meanwhile (refilled ack:auto
        windows) is written on the next loop turn, so one busy client cannot starve the
        loop."""
        self._flush_scheduled = False
        transport = self.transport
        if transport is None or self._closed:
            return
        data = self._guard(self.session.data_to_send)
        if data:
            self.server.make_durable()  # no RECEIPT leaves before what it promises is
            transport.write(data)  # may call pause_writing() synchronously
            self.last_send = self.loop.time()
            self._guard(self.session.written)
        if self.session.closing:
            self.close()
            return
        self._hold_reading()
        if self.session.has_output() and not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def _hold_reading(self) -> None:
        """Producer flow control: stop reading a client whose sends without receipts
        pile up in the broker (``StompSession.reading_held``), read again once they went
        through."""
        transport = self.transport
        held = self.session.reading_held
        if transport is None or held == self._held_paused:
            return
        self._held_paused = held
        if held:
            log.info("STOMP client %s keeps sending while its sends wait for space: not "
                     "reading it until they go through (producer flow control)", self.address)
            if not self._reading_paused:
                transport.pause_reading()
        elif not self._reading_paused:
            transport.resume_reading()

    def _guard(self, fn: Callable[[], object]) -> bytes:
        try:
            result = fn()
        except Exception:
            log.exception("internal error serving a STOMP connection; closing it")
            self.close()
            return b""
        return result if isinstance(result, bytes) else b""

    @_holding_core
    def close(self) -> None:
        """End this connection: the core connection is closed (open transactions roll
        back, unacked deliveries return), then the socket after pending output."""
        if self._closed:
            return
        self._closed = True
        self.server.release(self)
        if self._hb_handle is not None:
            self._hb_handle.cancel()
        if self._connect_timer is not None:
            self._connect_timer.cancel()
        try:
            self.session.connection_lost()
        except Exception:
            log.exception("error closing a STOMP session")
        if self.transport is not None:
            self.transport.close()
        self.server.reschedule_timers()

    # -- heart-beats ----------------------------------------------------------------------

    def _schedule_heartbeat(self) -> None:
        s = self.session
        intervals = [i for i in (s.send_interval, s.recv_interval) if i]
        if intervals and not self._closed:
            self._hb_handle = self.loop.call_later(min(intervals) / 2000.0, self._heartbeat)

    @_holding_core
    def _heartbeat(self) -> None:
        s = self.session
        now = self.loop.time()
        if s.recv_interval and not (self._reading_paused or self._held_paused) and (
            now - self.last_recv > 2 * s.recv_interval / 1000.0
        ):
            log.info("dropping a STOMP client silent for more than %d ms", 2 * s.recv_interval)
            if self.transport is not None:
                self.transport.abort()
            self.close()
            return
        idle = now - self.last_send >= s.send_interval / 2000.0
        if s.send_interval and idle and self.transport is not None and not self._reading_paused:
            self.transport.write(_EOL)
            self.last_send = now
        self._schedule_heartbeat()


class StompServer:
    """Serves STOMP for one :class:`Broker` on the running event loop."""

    def __init__(
        self,
        broker: Broker,
        *,
        limits: CodecLimits | None = None,
        heartbeat_ms: int = 10_000,
        connection_limits: ConnectionLimits | None = None,
        core_lock: AbstractContextManager[object] | None = None,
        owns_broker: bool = True,
        idle_spin_us: int = 0,
    ) -> None:
        self.broker = broker
        #: held around every call into the core: nothing for a broker this server owns
        #: alone; the in-process broker's re-entrant lock for a connector (.connector)
        self.core_lock: AbstractContextManager[object] = core_lock or nullcontext()
        #: the core has other threads (a connector's): callbacks hold ``core_lock``; a
        #: plain ``jmspy broker`` runs five callbacks per message without entering it
        self.shares_core = core_lock is not None
        #: stop() closes the broker (``jmspy broker``), or leaves it to its owner (a
        #: connector of a ``vm://`` broker, which outlives its listeners)
        self.owns_broker = owns_broker
        self.limits = limits or CodecLimits()
        self.heartbeat_ms = heartbeat_ms
        self.connection_limits = connection_limits or ConnectionLimits()
        self.throttle = LoginThrottle(self.connection_limits.throttle, broker.now)
        #: One thread checks passwords: the loop keeps the other core, and a flood of
        #: logins queues there instead of stalling everyone.
        self.login_pool = ThreadPoolExecutor(1, thread_name_prefix="jmspy-login")
        self.connections: set[_Connection] = set()
        self._per_address: dict[str | None, int] = {}
        self.loop = asyncio.get_running_loop()
        #: schedules a connection's flush; from another thread when the core is shared
        self.call_soon: Callable[[Callable[[], object]], object] = (
            self.loop.call_soon if core_lock is None else self.loop.call_soon_threadsafe)
        self._server: asyncio.Server | None = None
        #: While a connection's ``data_received`` runs, the connections it gave output
        #: (deliveries of its SENDs, say): written when it ends, in the order woken, not
        #: a loop turn later by a callback each (on asyncio's loop one more epoll_wait and
        #: ``_run_once`` per message). None outside ``data_received``.
        self._woken: list[_Connection] | None = None
        #: woken connections whose flush waits for the loop turn's group commit
        self._due: list[_Connection] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due: int | None = None
        #: After a read the loop polls for more, without sleeping, for a window
        #: (.loop_polling; jmspy/idle_spin.py: what it saves, why it is adaptive).
        #: ``jmspy broker``, which has its process to itself, polls by default
        #: (``[broker] idle-spin-us``); a server embedded in another program (a ``vm://``
        #: broker's connector, a test) does not unless asked: each turn of its loop would
        #: take the GIL from that program's threads.
        self.polling = LoopPolling(self.loop, idle_spin_us, lambda: broker.closed)

    def schedule_flush(self, conn: _Connection) -> None:
        """Have ``conn``'s output written: at the end of the batch open, else by a flush
        callback on the loop (from another thread when the core is shared: no batch is
        open then, since a batch holds the core)."""
        woken = self._woken
        if woken is not None:
            woken.append(conn)
        else:
            self.call_soon(conn.flush)

    def open_batch(self) -> None:
        """Start collecting woken connections (a connection's ``data_received``, which
        ends with :meth:`flush_woken`; calls into the core do not nest one in another)."""
        self._woken = []

    def flush_woken(self) -> None:
        """Write what the batch's woken connections have, ending the batch. While the
        store has writes pending they wait for the flush callback instead, as the writer's
        own RECEIPT does: the first flush of the loop turn commits the writes of every
        connection read in it (group commit), and nothing goes out before that commit."""
        woken, self._woken = self._woken, None
        if not woken:
            return
        store = self.broker.store
        if store is not None and store.pending:
            self._due.extend(woken)
            self.call_soon(self.flush_due)
            return
        self._flush_each(woken)

    def flush_due(self) -> None:
        """Write what the connections whose flush waits for the group commit have (the
        first one commits); a flooding connection's next batch calls it first too."""
        due, self._due = self._due, []
        self._flush_each(due)

    @staticmethod
    def _flush_each(conns: list[_Connection]) -> None:
        for conn in conns:
            try:
                conn.flush()
            except Exception:  # that client's failure, not the one whose data this was
                log.exception("internal error writing to a STOMP connection; closing it")
                conn.close()

    def admit(self, conn: _Connection) -> str | None:
        """Count a new connection in, or say why it may not come in."""
        limits = self.connection_limits
        if limits.max_connections and len(self.connections) >= limits.max_connections:
            return (f"this broker already serves {len(self.connections)} connections, its "
                    f"[limits] max-connections; try again later")
        same = self._per_address.get(conn.address, 0)
        if limits.max_connections_per_address and same >= limits.max_connections_per_address:
            return (f"{same} connections from {conn.address} already, the [limits] "
                    "max-connections-per-address; close some first")
        self.connections.add(conn)
        self._per_address[conn.address] = same + 1
        return None

    def release(self, conn: _Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            left = self._per_address.get(conn.address, 1) - 1
            if left > 0:
                self._per_address[conn.address] = left
            else:
                self._per_address.pop(conn.address, None)

    def protocol(self) -> asyncio.Protocol:
        """A new client connection's protocol object, as the listening socket makes one
        per accepted socket; a host without sockets (an in-process driver) gives it a
        transport with ``connection_made`` and feeds it bytes."""
        return _Connection(self)

    async def start(self, host: str = "127.0.0.1", port: int = 61613) -> tuple[str, int]:
        """Listen; returns the bound (host, port) (useful with port 0)."""
        self._server = await self.loop.create_server(
            # a deep accept backlog: a burst of connections is accepted (and counted
            # against the limits) at once instead of waiting in the kernel for SYN retries
            self.protocol, host, port, reuse_address=True, backlog=1024
        )
        addr = self._server.sockets[0].getsockname()
        return str(addr[0]), int(addr[1])

    def make_durable(self) -> None:
        """Commit the store's pending writes (one fsync for everything since the last
        commit). A store that cannot commit (disk full, I/O error) must not be answered
        with RECEIPTs: the broker stops, loudly, rather than promise what is not kept."""
        store = self.broker.store
        if store is None or not store.pending:
            return
        try:
            store.commit()
        except Exception:
            log.critical("cannot commit the message store; stopping the broker so that no "
                         "RECEIPT promises a message that is not on disk", exc_info=True)
            for conn in list(self.connections):  # unanswered: clients see the connection drop
                if conn.transport is not None:
                    conn.transport.abort()
            raise

    def reschedule_timers(self) -> None:
        """Arm one loop timer for the broker's next deadline (expiry, scheduled delivery)."""
        if self.broker.closed:
            return
        due = self.broker.next_deadline()
        if due is None or (self._timer_due is not None and self._timer_due <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        delay = max(0.0, (due - self.broker.now()) / 1000.0)
        self._timer = self.loop.call_at(self.loop.time() + delay, self._on_timer)

    def _on_timer(self) -> None:
        with self.core_lock:
            self._process_timers()

    def _process_timers(self) -> None:
        self._timer = None
        self._timer_due = None
        if self.broker.closed:
            return
        try:
            self.broker.process_timers()
        except Exception:
            log.exception("broker timer processing failed")
        for conn in list(self.connections):
            conn.flush()
        self.reschedule_timers()

    async def stop(self) -> None:
        """Close listeners, every connection, then the broker (if this server owns it)."""
        if self._server is not None:
            self._server.close()
        with self.core_lock:
            for conn in list(self.connections):
                conn.flush()
                conn.close()
            if self._timer is not None:
                self._timer.cancel()
            if self.owns_broker:
                self.broker.close()
        self.login_pool.shutdown(wait=False, cancel_futures=True)
        if self._server is not None:
            await self._server.wait_closed()
        await asyncio.sleep(0)
