"""asyncio host of the STOMP sessions: sockets, heart-beats, back-pressure, timers.

Every call into the broker core happens on the event loop's thread (protocol callbacks
and loop timers), so the single-threaded core needs no lock. Each TCP connection is one
:class:`asyncio.Protocol` driving one sans-I/O :class:`StompSession`; a callback-based
protocol rather than a reader task per connection, because bytes go straight from
``data_received`` into the parser with no task switch per read. Any exception while
serving one connection closes that connection only.

Back-pressure: the transport's write buffer has a high-water mark. Above it the session
stops granting credit (so no new deliveries are produced for that client) and the socket
stops being read (so a client that floods SENDs without reading its receipts cannot grow
our buffer either); below the low-water mark both resume. Memory per slow client is
bounded by its credit windows plus the high-water mark.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import cast

from jmspy.stomp_frames import CodecLimits

from ...core import Broker
from .protocol import StompSession

__all__ = ["HIGH_WATER", "StompServer"]

log = logging.getLogger("jmspy.broker_ref.stomp")

HIGH_WATER = 256 * 1024
_EOL = b"\n"


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
        self.session.wakeup = self._wakeup

    def _wakeup(self) -> None:
        """The session has new output produced by another connection's call or a timer."""
        if not self._flush_scheduled and not self._closed:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a cast, not an isinstance check: uvloop's transports implement the interface
        # without subclassing asyncio.Transport
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=HIGH_WATER, low=HIGH_WATER // 4)
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.last_recv = self.loop.time()
        session = self.session
        connected = session.connected
        try:
            session.receive_data(data)
        except Exception:
            log.exception("internal error serving a STOMP connection; closing it")
            self.close()
            return
        if not connected and session.connected:
            self._schedule_heartbeat()
        self.flush()
        self.server.reschedule_timers()

    def eof_received(self) -> bool | None:
        self.close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    def pause_writing(self) -> None:
        self.session.pause_credit()
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self._closed:
            return
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        self.last_recv = self.loop.time()  # we did not read while paused: not silence
        self._guard(self.session.resume_credit)
        self.flush()

    # -- output ---------------------------------------------------------------------------

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
            transport.write(data)  # may call pause_writing() synchronously
            self.last_send = self.loop.time()
            self._guard(self.session.written)
        if self.session.closing:
            self.close()
        elif self.session.has_output() and not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def _guard(self, fn: Callable[[], object]) -> bytes:
        try:
            result = fn()
        except Exception:
            log.exception("internal error serving a STOMP connection; closing it")
            self.close()
            return b""
        return result if isinstance(result, bytes) else b""

    def close(self) -> None:
        """End this connection: the core connection is closed (open transactions roll
        back, unacked deliveries return), then the socket after pending output."""
        if self._closed:
            return
        self._closed = True
        self.server.connections.discard(self)
        if self._hb_handle is not None:
            self._hb_handle.cancel()
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

    def _heartbeat(self) -> None:
        s = self.session
        now = self.loop.time()
        if s.recv_interval and not self._reading_paused and (
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
    ) -> None:
        self.broker = broker
        self.limits = limits or CodecLimits()
        self.heartbeat_ms = heartbeat_ms
        self.connections: set[_Connection] = set()
        self.loop = asyncio.get_running_loop()
        self._server: asyncio.Server | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due: int | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 61613) -> tuple[str, int]:
        """Listen; returns the bound (host, port) (useful with port 0)."""
        self._server = await self.loop.create_server(
            lambda: _Connection(self), host, port, reuse_address=True
        )
        addr = self._server.sockets[0].getsockname()
        return str(addr[0]), int(addr[1])

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
        """Close listeners, every connection, then the broker."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.flush()
            conn.close()
        if self._timer is not None:
            self._timer.cancel()
        self.broker.close()
        if self._server is not None:
            await self._server.wait_closed()
        await asyncio.sleep(0)
