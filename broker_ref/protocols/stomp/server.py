"""asyncio host of the STOMP sessions: sockets, heart-beats, back-pressure, timers.

Every call into the broker core happens on the event loop's thread (protocol callbacks
and loop timers), so the single-threaded core needs no lock. Each TCP connection is one
:class:`asyncio.Protocol` driving one sans-I/O :class:`StompSession`; a callback-based
protocol rather than a reader task per connection, because bytes go straight from
``data_received`` into the parser with no task switch per read. Any exception while
serving one connection closes that connection only.

No client can take the loop from the others (:class:`ConnectionLimits`): a connection
must finish CONNECT within ``connect_timeout``; connections are capped in total and per
source address; a connection that negotiated no client heart-beats and sends nothing for
``idle_timeout`` is closed; passwords are checked on a worker thread (hashing is slow on
purpose) while the connection stops being read, and failed logins are throttled per
address and user name (:class:`~jmspy.broker_ref.core.throttle.LoginThrottle`). The bytes
of frames still being read count against the broker's input budget
(:class:`~jmspy.broker_ref.core.input_budget.InputBudget`): once it is spent, connections
holding part of a frame stop being read until frames complete. What is refused or closed
is counted in ``Broker.usage()`` (:mod:`~jmspy.broker_ref.core.listener_stats`).

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
from ...core.input_budget import DEFAULT_MAX_FRAME_BYTES, InputBudget
from ...core.listener_stats import Closed, Refused
from ...core.store_faults import StoreWriteFailed
from ...core.throttle import LoginThrottle, ThrottleSettings
from ...tls_config import cert_user
from .connect import LoginRequest
from .loop_polling import LoopPolling
from .protocol import TURN_FRAMES, StompSession
from .tls import TlsListener

__all__ = ["HIGH_WATER", "ConnectionLimits", "StompServer"]


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Per-server limits on connections (the ``[limits]`` keys in kebab-case).

    ``connect_timeout`` (s, 0 = none): RabbitMQ's handshake timeout is 10 s.
    ``max_connections``: ActiveMQ's transport connector default, 1000 (0 = no cap).
    ``max_connections_per_address`` (0 = no cap; None = a tenth of ``max_connections``,
    100 by default): one address, loopback included, cannot take every connection.
    ``idle_timeout`` (s, 0 = none): a connected client that negotiated no heart-beats
    towards the broker, sends nothing (no frame, no EOL) and is sent no frame for this
    long is closed with an ERROR; 60 s, Artemis' STOMP connection TTL. With heart-beats
    the heart-beat rule (silent past twice the interval) decides instead.
    ``input_budget`` (bytes, 0 = none; None = the broker's own, 64 MiB by default): frame
    bytes being read, across the broker's connections (.core.input_budget).
    """

    connect_timeout: float = 10.0
    max_connections: int = 1000
    max_connections_per_address: int | None = None
    idle_timeout: float = 60.0
    throttle: ThrottleSettings = field(default_factory=ThrottleSettings)
    input_budget: int | None = None

    @property
    def per_address_cap(self) -> int:
        """The per-address cap in force (0: none)."""
        if self.max_connections_per_address is not None:
            return self.max_connections_per_address
        return max(1, self.max_connections // 10) if self.max_connections else 0

log = logging.getLogger("jmspy.broker.stomp")

HIGH_WATER = 256 * 1024
_EOL = b"\n"
#: Seconds a closed connection's socket is still read (and what arrives dropped) after
#: its write side is shut, unless the client closes first (see _Connection._end_transport).
LINGER_S = 2.0

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

    def __init__(self, server: StompServer, user_from_cert: str | None = None) -> None:
        self.server = server
        #: on a TLS listener that takes certificates as identities (.tls): the subject
        #: field naming the user
        self._user_from_cert = user_from_cert
        #: who the client's TLS certificate says it is (then logged in as that user
        #: without a password); None: the CONNECT's login and passcode decide
        self.certificate_user: str | None = None
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
        self._idle_timer: asyncio.TimerHandle | None = None
        #: when frames (not heart-beats) were last written to this client
        self._frames_sent = self.last_send
        #: bytes of unfinished frames this connection holds (as told to the input budget)
        self._input_held = 0
        #: reading stopped by the broker's input budget (other connections' frames first)
        self._budget_paused = False

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
        if self._user_from_cert is not None:
            self.certificate_user = cert_user(transport.get_extra_info("peercert"),
                                              self._user_from_cert)
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
        self.server.broker.listeners.close(Closed.CONNECT_TIMEOUT)
        if self._received_any:
            self._refuse("CONNECT timeout", detail)
        else:  # a silent socket gets no frame: it may not even be a STOMP client
            log.warning("closing STOMP connection from %s: %s", self.address, detail)
            self.close()

    def _start_login(self, request: LoginRequest) -> None:
        """Check the password on the server's login thread; read nothing meanwhile."""
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            if not (self._held_paused or self._budget_paused or self._turn_paused):
                self.transport.pause_reading()
        self.loop.create_task(self._login(request))

    async def _login(self, request: LoginRequest) -> None:
        server = self.server
        policy = server.broker.security
        assert policy is not None
        verdict = server.throttle.verdict(self.address, request.user)
        if verdict.refusal is not None:
            with server.core_lock:
                server.broker.listeners.refuse(Refused.LOGIN_THROTTLED)
                self._refuse("too many failed logins", verdict.refusal)
            return
        if verdict.delay_ms:
            await asyncio.sleep(verdict.delay_ms / 1000)
        try:
            if self.certificate_user is not None:
                principal = policy.authenticate_certificate(self.certificate_user,
                                                            request.user)
            else:
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
                if not (self._held_paused or self._budget_paused or self._turn_paused):
                    self.transport.resume_reading()
            self.flush()
            server.reschedule_timers()

    def _after_connect(self) -> None:
        if self.session.connected:
            if self._connect_timer is not None:
                self._connect_timer.cancel()
                self._connect_timer = None
            self._schedule_heartbeat()
            timeout = self.server.connection_limits.idle_timeout
            if timeout > 0 and not self.session.recv_interval:
                self._idle_timer = self.loop.call_later(timeout, self._idle_check)

    @_holding_core
    def _idle_check(self) -> None:
        """``idle_timeout`` after the last traffic (re-armed lazily: reads and writes only
        record their time): a client that sent nothing at all since, and was sent no frame
        either, is closed with an ERROR that says why. Frames written count so that a busy
        consumer that acknowledges automatically (and so sends nothing) is not idle; the
        broker's own heart-beat EOLs do not, or asking for them would keep any socket
        open. A connection we stopped reading is not idle."""
        self._idle_timer = None
        if self._closed:
            return
        timeout = self.server.connection_limits.idle_timeout
        silent = self.loop.time() - max(self.last_recv, self._frames_sent)
        if silent < timeout or self._reading_paused or self._held_paused or \
                self._budget_paused:
            wait = timeout - silent if silent < timeout else timeout
            self._idle_timer = self.loop.call_later(wait, self._idle_check)
            return
        self.server.broker.listeners.close(Closed.IDLE_TIMEOUT)
        self._refuse("idle timeout", (
            f"nothing received or delivered for {timeout:g} s ([limits] idle-timeout), and "
            "no heart-beats were negotiated: send frames more often, or ask for heart-beats "
            "in CONNECT (heart-beat:cx,cy with cx > 0) and send them"))

    def data_received(self, data: bytes) -> None:
        """Act on the frames ``data`` completes (up to a turn's batch), write this
        client's replies, then deliver what its SENDs brought (``Broker.defer_dispatch``):
        a producer waiting for a RECEIPT does not wait for the delivery work as well."""
        if self._closed:  # lingering after an ERROR (see _end_transport): dropped
            return
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
        if broker.store is not None:
            broker.store.writer = self  # a failed group commit names whose sends it lost
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
        held = session.input_buffered
        if held or self._input_held:
            self._account_input(held)
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

    def _account_input(self, held: int) -> None:
        """Tell the broker's input budget what this connection holds of unfinished frames;
        stop reading it when the budget says so, and read again those it releases."""
        self._input_held = held
        budget = self.server.broker.listeners.input
        if budget.hold(self, held) and not self._budget_paused:
            self._budget_paused = True
            if self.transport is not None and not (self._reading_paused or self._held_paused
                                                   or self._turn_paused):
                self.transport.pause_reading()
        self._resume_released(budget)

    @staticmethod
    def _resume_released(budget: InputBudget) -> None:
        """Read again the connections ``budget`` has released (it holds them by key)."""
        for conn in budget.resumable():
            cast(_Connection, conn)._budget_resume()

    def _budget_resume(self) -> None:
        """The input budget has room again: read this connection again (unless another
        reason to pause still holds)."""
        if not self._budget_paused or self._closed:
            return
        self._budget_paused = False
        self.last_recv = self.loop.time()  # we did not read while paused: not silence
        if self.transport is not None and not (self._reading_paused or self._held_paused
                                               or self._turn_paused):
            self.transport.resume_reading()

    def _after_turn(self) -> None:
        """Fair turns: while the session has frames left for a later turn this socket is
        not read (what it buffers stays bounded) and the next batch is a loop callback;
        once they are all acted on, reading resumes unless something else holds it."""
        transport = self.transport
        if transport is None or self._closed:
            return
        if self.session.input_waiting:
            if not self._turn_paused:
                self._turn_paused = True
                # every other reason to pause resumes only when this one does not hold
                if not (self._reading_paused or self._held_paused or self._budget_paused):
                    transport.pause_reading()
            if not self._turn_scheduled:
                self._turn_scheduled = True
                self.loop.call_soon(self._next_turn)
        elif self._turn_paused:
            self._turn_paused = False
            if not (self._reading_paused or self._held_paused or self._budget_paused):
                transport.resume_reading()

    def eof_received(self) -> bool | None:
        self._finish_input()
        self.close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closed:
            self.transport = None  # gone: what the last frames are answered is not written
            self._finish_input()
        self.close()

    def _finish_input(self) -> None:
        """Act on the frames the client sent before its socket ended that fair turns left
        for later turns: its last ACKs, SENDs and DISCONNECT count, as they did when every
        read was acted on at once (a client that writes its ACKs and closes must not see
        them redelivered)."""
        session = self.session
        while session.input_waiting and not self._closed:
            before = session.input_buffered
            self._serve(b"")
            if session.input_waiting and session.input_buffered >= before:
                break  # no progress (a login still being checked): nothing more to act on

    @_holding_core
    def pause_writing(self) -> None:
        self.session.pause_credit()
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            if not (self._held_paused or self._budget_paused or self._turn_paused):
                self.transport.pause_reading()

    @_holding_core
    def resume_writing(self) -> None:
        if self._closed:
            return
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            if not (self._held_paused or self._budget_paused or self._turn_paused):
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
        if data or self.server.store_refusals:
            self.server.make_durable()  # no RECEIPT leaves before what it promises is
            refusal = self.server.store_refusals.pop(self, None)
            if refusal is not None:  # its output may promise what was not kept
                self.fail("message not stored", refusal)
                return
            if self._closed:  # the broker stopped (an unusable store)
                return
        if data:
            transport.write(data)  # may call pause_writing() synchronously
            self.last_send = self._frames_sent = self.loop.time()
            self._guard(self.session.written)
        if self.session.closing:
            self.close()
            return
        self._hold_reading()
        if self._input_held:  # frames held back (login, producer flow) may be read now
            self._account_input(self.session.input_buffered)
        if self.session.has_output() and not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def fail(self, message: str, reason: str) -> None:
        """End this connection with an ERROR naming ``reason``; output not yet written is
        dropped, not sent: it may hold RECEIPTs for writes the store did not keep."""
        if self._closed:
            return
        self._guard(self.session.data_to_send)
        # replacing: an ERROR the session made already may have been in what a flush
        # took and then dropped, so this one is made whatever the session's state
        self._guard(lambda: self.session.refuse(message, reason, StoreWriteFailed.code,
                                                replacing=True))
        data = self._guard(self.session.data_to_send)
        if data and self.transport is not None:
            self.transport.write(data)
        self.close()

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
            if not (self._reading_paused or self._budget_paused or self._turn_paused):
                transport.pause_reading()
        elif not (self._reading_paused or self._budget_paused or self._turn_paused):
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
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._input_held or self._budget_paused:
            budget = self.server.broker.listeners.input
            budget.forget(self)
            self._input_held = 0
            self._resume_released(budget)
        try:
            self.session.connection_lost()
        except Exception:
            log.exception("error closing a STOMP session")
        if self.transport is not None:
            self._end_transport(self.transport)
        self.server.reschedule_timers()

    def _end_transport(self, transport: asyncio.Transport) -> None:
        """Close the socket once the pending output (an ERROR, say) is written. A client
        may still be sending -- the rest of a frame refused for its size -- and a socket
        closed with unread input answers with a RST, on which the kernel drops what it
        had not sent yet: the ERROR that says why. So the write side is shut first (FIN
        after the ERROR), and what still arrives is read and dropped for at most
        :data:`LINGER_S` (the client closes on the FIN), then the socket is closed."""
        if transport.is_closing():
            return
        try:
            transport.write_eof()
            transport.resume_reading()
        except (NotImplementedError, RuntimeError, OSError):
            transport.close()
            return
        lingering = self.server.lingering
        lingering.add(transport)

        def end() -> None:
            lingering.discard(transport)
            transport.close()

        self.loop.call_later(LINGER_S, end)

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
        if s.recv_interval and not (
            self._reading_paused or self._held_paused or self._budget_paused
        ) and now - self.last_recv > 2 * s.recv_interval / 1000.0:
            log.info("dropping a STOMP client silent for more than %d ms", 2 * s.recv_interval)
            self.server.broker.listeners.close(Closed.HEARTBEAT)
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
        self.limits = limits or CodecLimits(max_frame_bytes=DEFAULT_MAX_FRAME_BYTES)
        self.heartbeat_ms = heartbeat_ms
        self.connection_limits = connection_limits or ConnectionLimits()
        if self.connection_limits.input_budget is not None:  # the broker's, shared
            broker.listeners.input.set_limit(self.connection_limits.input_budget)
        self.throttle = LoginThrottle(self.connection_limits.throttle, broker.now)
        #: One thread checks passwords: the loop keeps the other core, and a flood of
        #: logins queues there instead of stalling everyone.
        self.login_pool = ThreadPoolExecutor(1, thread_name_prefix="jmspy-login")
        self.connections: set[_Connection] = set()
        #: sockets of closed connections still read until the client closes (at most
        #: LINGER_S), so that an ERROR before the close is not lost to a RST
        self.lingering: set[asyncio.Transport] = set()
        self._per_address: dict[str | None, int] = {}
        self.loop = asyncio.get_running_loop()
        #: schedules a connection's flush; from another thread when the core is shared
        self.call_soon: Callable[[Callable[[], object]], object] = (
            self.loop.call_soon if core_lock is None else self.loop.call_soon_threadsafe)
        #: the listening sockets: plain, and TLS (.tls)
        self._servers: list[asyncio.Server | TlsListener] = []
        self._tls: list[TlsListener] = []
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
        #: connections whose stored sends a failed commit lost, and why: their next flush
        #: sends that ERROR instead of their RECEIPTs
        self.store_refusals: dict[_Connection, str] = {}
        #: why the broker stopped serving for good (an unusable store); then called
        #: (``jmspy broker``: ends the process, non-zero)
        self.failed: str | None = None
        self.on_failed: Callable[[], object] | None = None

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
        """Count a new connection in, or say why it may not come in (and count that)."""
        limits = self.connection_limits
        if limits.max_connections and len(self.connections) >= limits.max_connections:
            self.broker.listeners.refuse(Refused.MAX_CONNECTIONS)
            return (f"this broker already serves {len(self.connections)} connections, its "
                    f"[limits] max-connections; try again later")
        same = self._per_address.get(conn.address, 0)
        cap = limits.per_address_cap
        if cap and same >= cap:
            self.broker.listeners.refuse(Refused.PER_ADDRESS)
            return (f"{same} connections from {conn.address} already, the [limits] "
                    f"max-connections-per-address = {cap}; close some first, or raise "
                    "max-connections-per-address in the broker's config")
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

    def protocol(self, user_from_cert: str | None = None) -> asyncio.Protocol:
        """A new client connection's protocol object, as the listening socket makes one
        per accepted socket; a host without sockets (an in-process driver) gives it a
        transport with ``connection_made`` and feeds it bytes."""
        return _Connection(self, user_from_cert)

    async def start(self, host: str = "127.0.0.1", port: int = 61613, *,
                    tls: TlsListener | None = None) -> tuple[str, int]:
        """Listen (again for each listener: plain, ``tls``); returns the bound (host, port)
        (useful with port 0)."""
        if tls is not None:
            self._servers.append(tls)
            self._tls.append(tls)
            return await tls.listen(host, port, lambda: self.protocol(tls.user_from_cert))
        server = await self.loop.create_server(
            # a deep accept backlog: a burst of connections is accepted (and counted
            # against the limits) at once instead of waiting in the kernel for SYN retries
            self.protocol, host, port, reuse_address=True, backlog=1024
        )
        self._servers.append(server)
        addr = server.sockets[0].getsockname()
        return str(addr[0]), int(addr[1])

    def make_durable(self) -> None:
        """Commit the store's pending writes (one fsync for everything since the last
        commit). A commit that fails for space or I/O is redone write by write by the
        store; the connections whose stored sends it still lost are told so with an
        ERROR instead of their RECEIPTs (:attr:`store_refusals`), everyone else carries
        on. A store that cannot be used any more stops the broker for real."""
        store = self.broker.store
        if store is None:
            return
        if store.pending:
            store.commit()
        lost = store.take_failed_writers()
        if lost:
            why = store.unusable or store.faulted or "the broker's store could not write"
            reason = (f"{why}; messages sent on "
                      "this connection since its last RECEIPT may not be stored: send "
                      "them again once the broker stores again")
            for writer in lost:
                if isinstance(writer, _Connection) and writer in self.connections:
                    self.store_refusals[writer] = reason
                    self.call_soon(writer.flush)  # which sends the ERROR
        if store.unusable is not None:
            self.fail(store.unusable)

    def fail(self, reason: str) -> None:
        """Stop serving for good: close the listeners (new clients are refused by the
        kernel, not accepted and dropped), end every connection with an ERROR naming
        ``reason``, then tell the owner (:attr:`on_failed`), which stops the process."""
        if self.failed is not None:
            return
        self.failed = reason
        log.critical("stopping the broker: %s", reason)
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.fail("broker stopping", reason)
        if self.on_failed is not None:
            self.on_failed()

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
        for server in self._servers:
            server.close()
        with self.core_lock:
            for conn in list(self.connections):
                conn.flush()
                conn.close()
            for transport in list(self.lingering):
                transport.abort()
            for tls in self._tls:
                tls.abort_sockets()
            self.lingering.clear()
            if self._timer is not None:
                self._timer.cancel()
            if self.owns_broker:
                self.broker.close()
        self.login_pool.shutdown(wait=False, cancel_futures=True)
        for server in self._servers:
            await server.wait_closed()
        await asyncio.sleep(0)
