"""asyncio host of the STOMP sessions: listeners, admission, flushes, timers, shutdown.

Every call into the broker core happens on the event loop's thread (protocol callbacks
and loop timers), so the single-threaded core needs no lock. Each accepted socket is one
:class:`~.connection.StompConnection` (bytes in, session, bytes out; fair turns and
back-pressure are described there); this module is the server they share.

No client can take the loop from the others (:class:`ConnectionLimits`): a connection
must finish CONNECT within ``connect_timeout``; connections are capped in total and per
source address; a connection that negotiated no client heart-beats and sends nothing for
``idle_timeout`` is closed (:mod:`.liveness`); passwords are checked on a worker thread
(hashing is slow on purpose) while the connection stops being read, and failed logins are
throttled per address and user name
(:class:`~jmspy.broker_ref.core.throttle.LoginThrottle`). The bytes of frames still being
read count against the broker's input budget
(:class:`~jmspy.broker_ref.core.input_budget.InputBudget`). What is refused or closed is
counted in ``Broker.usage()`` (:mod:`~jmspy.broker_ref.core.listener_stats`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from jmspy.stomp_frames import CodecLimits

from ...core import Broker
from ...core.input_budget import DEFAULT_MAX_FRAME_BYTES
from ...core.throttle import LoginThrottle
from ..connection_limits import Admission, ConnectionLimits
from ..durability import make_durable
from ..logins import Logins
from .connection import HIGH_WATER, LINGER_S, StompConnection
from .loop_polling import LoopPolling
from .tls import TlsListener

__all__ = ["HIGH_WATER", "LINGER_S", "ConnectionLimits", "StompConnection", "StompServer"]

log = logging.getLogger("jmspy.broker.stomp")

#: the connection class under the name it had when it lived here
_Connection = StompConnection


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
        #: the credential checks (throttle, certificate users, passwords off the loop),
        #: shared with the MQTT listener of the same broker process (runner.py)
        self.logins = Logins(broker, LoginThrottle(self.connection_limits.throttle,
                                                   broker.now), core_lock)
        self.throttle = self.logins.throttle
        self._admission: Admission[StompConnection] = Admission(
            self.connection_limits, broker.listeners)
        self.connections = self._admission.connections
        #: sockets of closed connections still read until the client closes (at most
        #: LINGER_S), so that an ERROR before the close is not lost to a RST
        self.lingering: set[asyncio.Transport] = set()
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
        self._woken: list[StompConnection] | None = None
        #: woken connections whose flush waits for the loop turn's group commit
        self._due: list[StompConnection] = []
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
        self.store_refusals: dict[StompConnection, str] = {}
        #: why the broker stopped serving for good (an unusable store); then called
        #: (``jmspy broker``: ends the process, non-zero)
        self.failed: str | None = None
        self.on_failed: Callable[[], object] | None = None

    def schedule_flush(self, conn: StompConnection) -> None:
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
        store has writes pending that must reach the disk they wait for the flush callback
        instead, as the writer's own RECEIPT does: the first flush of the loop turn commits
        the writes of every connection read in it (group commit), and nothing goes out
        before that commit. Writes that undo each other (a persistent message an
        ``ack:auto`` consumer took at once) are rolled back by the flush, not waited for."""
        woken, self._woken = self._woken, None
        if not woken:
            return
        store = self.broker.store
        if store is not None and store.must_sync:  # else the commit costs nothing
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
    def _flush_each(conns: list[StompConnection]) -> None:
        for conn in conns:
            try:
                conn.flush()
            except Exception:  # that client's failure, not the one whose data this was
                log.exception("internal error writing to a STOMP connection; closing it")
                conn.close()

    def admit(self, conn: StompConnection) -> str | None:
        """Count a new connection in, or say why it may not come in (and count that)."""
        return self._admission.admit(conn)

    def release(self, conn: StompConnection) -> None:
        self._admission.release(conn)

    def protocol(self, user_from_cert: str | None = None) -> asyncio.Protocol:
        """A new client connection's protocol object, as the listening socket makes one
        per accepted socket; a host without sockets (an in-process driver) gives it a
        transport with ``connection_made`` and feeds it bytes."""
        return StompConnection(self, user_from_cert)

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
        unusable = make_durable(self.broker.store)  # refusals: StompConnection.store_refused
        if unusable is not None:
            self.fail(unusable)

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

    def close_connection(self, core: object, reason: str) -> bool:
        """End the client connection whose core connection is ``core`` (its session is
        the core connection's callback) with an ERROR saying ``reason``; False when no
        connection of this server has it (the management API's close)."""
        for conn in list(self.connections):
            if conn.session is getattr(core, "callback", None):
                conn.refuse("connection closed by an administrator", reason)
                return True
        return False

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
        self.logins.close()
        for server in self._servers:
            await server.wait_closed()
        await asyncio.sleep(0)
