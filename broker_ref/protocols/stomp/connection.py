"""One STOMP client's TCP connection: bytes in -> :class:`StompSession` -> bytes out.

Each TCP connection is one :class:`asyncio.Protocol` driving one sans-I/O session; a
callback-based protocol rather than a reader task per connection, because bytes go
straight from ``data_received`` into the parser with no task switch per read. Any
exception while serving one connection closes that connection only. Its timers live in
:mod:`.liveness`, the reasons its socket is not read in :mod:`.read_pauses`.

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

Passwords are checked on the server's login thread (hashing is slow on purpose) while the
connection stops being read, and failed logins are throttled per address and user name.
The bytes of frames still being read count against the broker's input budget
(:class:`~jmspy.broker_ref.core.input_budget.InputBudget`): once it is spent, connections
holding part of a frame stop being read until frames complete.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from ...core.input_budget import InputBudget
from ...store.store_faults import StoreWriteFailed
from ...tls_config import cert_user
from ..lingering import LINGER_S, end_after_linger
from ..logins import LoginRefused
from .connect import LoginRequest
from .holding_core import holding_core
from .liveness import Liveness
from .protocol import TURN_FRAMES, StompSession
from .read_pauses import Pause, ReadPauses

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from jmspy.stomp_frames import CodecLimits

    from ...core import Broker
    from ..connection_limits import ConnectionLimits
    from ..logins import Logins
    from .loop_polling import LoopPolling

__all__ = ["HIGH_WATER", "LINGER_S", "ConnectionServer", "StompConnection"]

log = logging.getLogger("jmspy.broker.stomp")

HIGH_WATER = 256 * 1024


#: A RECEIPT frame's receipt-id in a run of frames as the session encodes them.
_FIRST_RECEIPT = re.compile(rb"(?:^|\x00)\n*RECEIPT\nreceipt-id:([^\n]*)\n")


def _unescape(value: str) -> str:
    """A STOMP 1.1/1.2 header value as it was before its escaping (one pass)."""
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(0)), value)


_ESCAPE = re.compile(r"\\(.)")
_ESCAPES = {"n": "\n", "r": "\r", "c": ":", "\\": "\\"}


class ConnectionServer(Protocol):
    """What a connection needs of the server that accepted it
    (:class:`~.server.StompServer`): a Protocol, so that the connection sits below the
    server that makes connections and never imports it."""

    @property
    def broker(self) -> Broker: ...
    @property
    def core_lock(self) -> AbstractContextManager[object]: ...
    @property
    def shares_core(self) -> bool: ...
    @property
    def limits(self) -> CodecLimits: ...
    @property
    def heartbeat_ms(self) -> int: ...
    @property
    def connection_limits(self) -> ConnectionLimits: ...
    @property
    def logins(self) -> Logins: ...
    @property
    def lingering(self) -> set[asyncio.Transport]: ...
    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...
    @property
    def polling(self) -> LoopPolling: ...
    @property
    def store_refusals(self) -> dict[StompConnection, str]: ...
    @property
    def connections(self) -> set[StompConnection]: ...
    @property
    def call_soon(self) -> Callable[[Callable[[], object]], object]: ...

    def schedule_flush(self, conn: StompConnection) -> None: ...
    def open_batch(self) -> None: ...
    def flush_woken(self) -> None: ...
    def flush_due(self) -> None: ...
    def admit(self, conn: StompConnection) -> str | None: ...
    def release(self, conn: StompConnection) -> None: ...
    def make_durable(self) -> None: ...
    def reschedule_timers(self) -> None: ...


class StompConnection(asyncio.Protocol):
    """One TCP connection: bytes in -> session -> bytes out."""

    def __init__(self, server: ConnectionServer, user_from_cert: str | None = None
                 ) -> None:
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
        self._flush_scheduled = False
        self._closed = False
        #: why the socket is not read (back-pressure, producer flow, budget, fair turns)
        self.pauses = ReadPauses()
        self.session.wakeup = self._wakeup
        self.session.defer_login = True  # passwords are hashed off the loop (_login)
        self.session.turn_frames = TURN_FRAMES  # fair turns (the module docstring)
        self.session.turn_clock = time.perf_counter
        self._turn_scheduled = False
        self.address: str | None = None
        #: CONNECT and idle timeouts, heart-beats
        self.liveness = Liveness(self)
        #: bytes of unfinished frames this connection holds (as told to the input budget)
        self._input_held = 0

    @property
    def closed(self) -> bool:
        return self._closed

    def _wakeup(self) -> None:
        """The session has new output produced by another connection's call or a timer:
        written when that connection's ``data_received`` ends, else by a flush callback
        (:meth:`StompServer.schedule_flush`)."""
        if not self._flush_scheduled and not self._closed:
            self._flush_scheduled = True
            self.server.schedule_flush(self)

    # -- asyncio.Protocol -----------------------------------------------------------------

    @holding_core
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
            self.refuse("too many connections", refusal)
            return
        self.liveness.opened()

    def refuse(self, message: str, detail: str) -> None:
        """End the connection with an ERROR saying ``message`` (``detail`` its body),
        logged as a refusal."""
        log.warning("refusing STOMP client %s: %s", self.address, detail)
        self._guard(lambda: self.session.refuse(message, detail))
        self.flush()
        self.close()

    def _refuse_quietly(self, message: str, detail: str, code: str | None = None) -> None:
        """Like :meth:`refuse`, for refusals the broker already logs its own way."""
        self._guard(lambda: self.session.refuse(message, detail, code))
        self.flush()
        self.close()

    def _start_login(self, request: LoginRequest) -> None:
        """Check the password on the server's login thread; read nothing meanwhile."""
        if self.transport is not None:
            self.pauses.pause(Pause.OUTPUT, self.transport)
        self.loop.create_task(self._login(request))

    async def _login(self, request: LoginRequest) -> None:
        server = self.server
        try:
            principal = await server.logins.check(self.address, request.user,
                                                  request.password, self.certificate_user)
        except LoginRefused as no:
            with server.core_lock:
                if no.throttled:
                    self.refuse(no.message, no.detail)
                elif not self._closed:
                    self._refuse_quietly(no.message, no.detail, no.code)
            return
        if self._closed:
            return
        with server.core_lock:
            self._guard(lambda: self.session.login_done(principal))
            self._after_connect()
            self._after_turn()
            if self.transport is not None and not self._closed:
                self.pauses.resume(Pause.OUTPUT, self.transport)
            self.flush()
            server.reschedule_timers()

    def _after_connect(self) -> None:
        if self.session.connected:
            self.liveness.connected()

    def data_received(self, data: bytes) -> None:
        """Act on the frames ``data`` completes (up to a turn's batch), write this
        client's replies, then deliver what its SENDs brought (``Broker.defer_dispatch``):
        a producer waiting for a RECEIPT does not wait for the delivery work as well."""
        if self._closed:  # lingering after an ERROR (see _end_transport): dropped
            return
        self._serve(data)
        self.server.polling.read_served()

    @holding_core
    def _next_turn(self) -> None:
        """Fair turns: the next batch of the frames this client sent, a loop turn after
        the last one (other connections were read in between). What the connections read
        meanwhile are owed (their commit and RECEIPTs) is written first, not a batch later."""
        self._turn_scheduled = False
        if not self._closed:
            self.server.flush_due()
            self._serve(b"")

    @holding_core
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
        self.liveness.received()
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
        elif session.login_request is not None and not self.pauses.paused(Pause.OUTPUT):
            self._start_login(session.login_request)
        self._after_turn()
        store = self.server.broker.store
        if store is not None and store.must_sync:
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
        if budget.hold(self, held):
            self.pauses.pause(Pause.INPUT_BUDGET, self.transport)
        self._resume_released(budget)

    @staticmethod
    def _resume_released(budget: InputBudget) -> None:
        """Read again the connections ``budget`` has released (it holds them by key)."""
        for conn in budget.resumable():
            cast(StompConnection, conn)._budget_resume()

    def _budget_resume(self) -> None:
        """The input budget has room again: read this connection again (unless another
        reason to pause still holds)."""
        if not self.pauses.paused(Pause.INPUT_BUDGET) or self._closed:
            return
        self.liveness.reading_resumed()
        self.pauses.resume(Pause.INPUT_BUDGET, self.transport)

    def _after_turn(self) -> None:
        """Fair turns: while the session has frames left for a later turn this socket is
        not read (what it buffers stays bounded) and the next batch is a loop callback;
        once they are all acted on, reading resumes unless something else holds it."""
        transport = self.transport
        if transport is None or self._closed:
            return
        if self.session.input_waiting:
            self.pauses.pause(Pause.TURN, transport)
            if not self._turn_scheduled:
                self._turn_scheduled = True
                self.loop.call_soon(self._next_turn)
        else:
            self.pauses.resume(Pause.TURN, transport)

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

    @holding_core
    def pause_writing(self) -> None:
        self.session.pause_credit()
        if self.transport is not None:
            self.pauses.pause(Pause.OUTPUT, self.transport)

    @holding_core
    def resume_writing(self) -> None:
        if self._closed:
            return
        if self.transport is not None:
            self.pauses.resume(Pause.OUTPUT, self.transport)
        self.liveness.reading_resumed()  # we did not read while paused: not silence
        self._guard(self.session.resume_credit)
        self.flush()

    # -- output ---------------------------------------------------------------------------

    def store_refused(self, why: str) -> None:
        """A group commit lost messages this connection sent (.durability): its next
        flush sends an ERROR instead of their RECEIPTs."""
        server = self.server
        if self in server.connections:
            server.store_refusals[self] = (
                f"{why}; messages sent on this connection since its last RECEIPT may not "
                "be stored: send them again once the broker stores again")
            server.call_soon(self.flush)

    @holding_core
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
                self.fail("message not stored", refusal, unsent=data)
                return
            if self._closed:  # the broker stopped (an unusable store)
                return
        if data:
            transport.write(data)  # may call pause_writing() synchronously
            self.liveness.wrote_frames()
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

    def fail(self, message: str, reason: str, unsent: bytes = b"") -> None:
        """End this connection with an ERROR naming ``reason``; output not yet written
        (``unsent``, what a flush already took) is dropped, not sent: it may hold
        RECEIPTs for writes the store did not keep."""
        if self._closed:
            return
        dropped = unsent + self._guard(self.session.data_to_send)
        # the ERROR answers the first RECEIPT it replaces (the first frame whose outcome
        # the client is left without), so the client's call waiting for it fails with it
        found = _FIRST_RECEIPT.search(dropped) if dropped else None
        receipt = None if found is None else _unescape(found.group(1).decode("utf-8", "replace"))
        # replacing: an ERROR the session made already may have been in what a flush
        # took and then dropped, so this one is made whatever the session's state
        self._guard(lambda: self.session.refuse(message, reason, StoreWriteFailed.code,
                                                replacing=True, receipt=receipt))
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
        if transport is None or held == self.pauses.paused(Pause.PRODUCER_FLOW):
            return
        if held:
            log.info("STOMP client %s keeps sending while its sends wait for space: not "
                     "reading it until they go through (producer flow control)", self.address)
            self.pauses.pause(Pause.PRODUCER_FLOW, transport)
        else:
            self.pauses.resume(Pause.PRODUCER_FLOW, transport)

    def _guard(self, fn: Callable[[], object]) -> bytes:
        try:
            result = fn()
        except Exception:
            log.exception("internal error serving a STOMP connection; closing it")
            self.close()
            return b""
        return result if isinstance(result, bytes) else b""

    @holding_core
    def close(self) -> None:
        """End this connection: the core connection is closed (open transactions roll
        back, unacked deliveries return), then the socket after pending output."""
        if self._closed:
            return
        self._closed = True
        self.server.release(self)
        self.liveness.stop()
        if self._input_held or self.pauses.paused(Pause.INPUT_BUDGET):
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
        """Close the socket once the pending output (an ERROR, say) is written, lingering
        so that no RST drops it (:mod:`..lingering`)."""
        end_after_linger(transport, self.server.lingering, self.loop)
