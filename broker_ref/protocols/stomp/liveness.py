"""When a STOMP connection is given up for silence: the CONNECT timeout, the idle timeout
of a client without heart-beats, and the heart-beats both ways.

A connection must finish CONNECT within ``connect_timeout``; a connection that negotiated
no client heart-beats and sends nothing for ``idle_timeout`` is closed with an ERROR that
says why; with heart-beats, a client silent past twice its interval is dropped, and the
broker sends its own EOLs when it has written nothing for half of its interval. A socket
the broker stopped reading is never silent (:attr:`.read_pauses.ReadPauses.blocked`).
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from ...core.listener_stats import Closed
from .holding_core import holding_core
from .read_pauses import Pause, ReadPauses

if TYPE_CHECKING:
    from ...core import Broker
    from ..connection_limits import ConnectionLimits
    from .protocol import StompSession


class LivenessServer(Protocol):
    """What the timers read of the connection's server."""

    @property
    def broker(self) -> Broker: ...
    @property
    def connection_limits(self) -> ConnectionLimits: ...
    @property
    def shares_core(self) -> bool: ...
    @property
    def core_lock(self) -> AbstractContextManager[object]: ...


class LivenessHost(Protocol):
    """What the timers read and call of their connection (:mod:`.connection`'s
    ``StompConnection``): a Protocol, so that this module sits below it."""

    @property
    def server(self) -> LivenessServer: ...
    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...
    @property
    def session(self) -> StompSession: ...
    @property
    def transport(self) -> asyncio.Transport | None: ...
    @property
    def pauses(self) -> ReadPauses: ...
    @property
    def address(self) -> str | None: ...
    @property
    def closed(self) -> bool: ...

    def refuse(self, message: str, detail: str) -> None: ...
    def close(self) -> None: ...


__all__ = ["Liveness", "LivenessHost", "LivenessServer"]

log = logging.getLogger("jmspy.broker.stomp")

_EOL = b"\n"


class Liveness:
    """The timers and traffic times of one connection (:mod:`.connection`)."""

    def __init__(self, conn: LivenessHost) -> None:
        self.conn = conn
        self.server = conn.server
        self.loop = conn.loop
        #: when the client last sent anything (bytes or a heart-beat)
        self.last_recv = self.loop.time()
        #: when anything (frames or heart-beats) was last written to the client
        self.last_send = self.last_recv
        #: when frames (not heart-beats) were last written to this client
        self.frames_sent = self.last_send
        #: the client sent something since the socket opened
        self.received_any = False
        self._hb_handle: asyncio.TimerHandle | None = None
        self._connect_timer: asyncio.TimerHandle | None = None
        self._idle_timer: asyncio.TimerHandle | None = None

    def opened(self) -> None:
        """The connection was admitted: it has ``connect_timeout`` to finish CONNECT."""
        timeout = self.server.connection_limits.connect_timeout
        if timeout > 0:
            self._connect_timer = self.loop.call_later(timeout, self._connect_timed_out)

    def received(self) -> None:
        """The client sent bytes."""
        self.last_recv = self.loop.time()
        self.received_any = True

    def reading_resumed(self) -> None:
        """The socket is read again: the time it was not read is not the client's
        silence."""
        self.last_recv = self.loop.time()

    def wrote_frames(self) -> None:
        self.last_send = self.frames_sent = self.loop.time()

    def connected(self) -> None:
        """CONNECT is done: heart-beats as negotiated, else the idle timeout."""
        if self._connect_timer is not None:
            self._connect_timer.cancel()
            self._connect_timer = None
        self._schedule_heartbeat()
        timeout = self.server.connection_limits.idle_timeout
        if timeout > 0 and not self.conn.session.recv_interval:
            self._idle_timer = self.loop.call_later(timeout, self._idle_check)

    def stop(self) -> None:
        """The connection is closed: no timer of it fires."""
        if self._hb_handle is not None:
            self._hb_handle.cancel()
        if self._connect_timer is not None:
            self._connect_timer.cancel()
        if self._idle_timer is not None:
            self._idle_timer.cancel()

    @holding_core
    def _connect_timed_out(self) -> None:
        self._connect_timer = None
        conn = self.conn
        if conn.closed or conn.session.connected:
            return
        timeout = self.server.connection_limits.connect_timeout
        detail = (f"no CONNECT completed within {timeout:g} s of opening the connection "
                  "([limits] connect-timeout); send CONNECT (or STOMP) first")
        self.server.broker.listeners.close(Closed.CONNECT_TIMEOUT)
        if self.received_any:
            conn.refuse("CONNECT timeout", detail)
        else:  # a silent socket gets no frame: it may not even be a STOMP client
            log.warning("closing STOMP connection from %s: %s", conn.address, detail)
            conn.close()

    @holding_core
    def _idle_check(self) -> None:
        """``idle_timeout`` after the last traffic (re-armed lazily: reads and writes only
        record their time): a client that sent nothing at all since, and was sent no frame
        either, is closed with an ERROR that says why. Frames written count so that a busy
        consumer that acknowledges automatically (and so sends nothing) is not idle; the
        broker's own heart-beat EOLs do not, or asking for them would keep any socket
        open. A connection we stopped reading is not idle."""
        self._idle_timer = None
        conn = self.conn
        if conn.closed:
            return
        timeout = self.server.connection_limits.idle_timeout
        silent = self.loop.time() - max(self.last_recv, self.frames_sent)
        if silent < timeout or conn.pauses.blocked:
            wait = timeout - silent if silent < timeout else timeout
            self._idle_timer = self.loop.call_later(wait, self._idle_check)
            return
        self.server.broker.listeners.close(Closed.IDLE_TIMEOUT)
        conn.refuse("idle timeout", (
            f"nothing received or delivered for {timeout:g} s ([limits] idle-timeout), and "
            "no heart-beats were negotiated: send frames more often, or ask for heart-beats "
            "in CONNECT (heart-beat:cx,cy with cx > 0) and send them"))

    def _schedule_heartbeat(self) -> None:
        s = self.conn.session
        intervals = [i for i in (s.send_interval, s.recv_interval) if i]
        if intervals and not self.conn.closed:
            self._hb_handle = self.loop.call_later(min(intervals) / 2000.0, self._heartbeat)

    @holding_core
    def _heartbeat(self) -> None:
        conn = self.conn
        s = conn.session
        now = self.loop.time()
        if s.recv_interval and not conn.pauses.blocked \
                and now - self.last_recv > 2 * s.recv_interval / 1000.0:
            log.info("dropping a STOMP client silent for more than %d ms", 2 * s.recv_interval)
            self.server.broker.listeners.close(Closed.HEARTBEAT)
            if conn.transport is not None:
                conn.transport.abort()
            conn.close()
            return
        idle = now - self.last_send >= s.send_interval / 2000.0
        transport = conn.transport
        if s.send_interval and idle and transport is not None and \
                not conn.pauses.paused(Pause.OUTPUT):
            transport.write(_EOL)
            self.last_send = now
        self._schedule_heartbeat()
