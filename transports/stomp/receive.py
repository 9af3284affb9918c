"""The frames a ``stomp://`` client receives, read off stomp.py's socket by jmspy's own
STOMP codec instead of stomp.py's parser.

Why: on a busy consumer stomp.py's reading is the largest client cost. Its ``__read``
re-slices the whole receive buffer once per frame (quadratic in the frames one
``recv`` brings), and ``utils.parse_frame`` splits the header block with regular
expressions and decodes each line in Python: measured ~34 us for a plain MESSAGE frame
and ~78 us for one carrying jmspy's 13 headers, against a few microseconds for the
compiled :class:`~jmspy._cext.stomp_codec.FrameParser` (which also bounds what a broker
can make us buffer).

What stays stomp.py's: the socket, the connection attempt, the receiver thread, heart-
beats, and what the thread does when the socket closes. Only the step that turns bytes
into frames is replaced, on one transport *instance*, by
:mod:`.stomppy_private` (the one module that touches stomp.py's private names), and only
on the stomp.py releases the tests ran against; any other keeps stomp.py's own reading
(slower, same behaviour). ``tests/test_stomp_receive.py`` checks which path is in use.

Routing: MESSAGE frames go straight to the transport's handler (stomp.py would sort its
listeners and build a dict per frame for each of them); every other frame (CONNECTED,
RECEIPT, ERROR) goes through stomp.py's ``process_frame`` so its own bookkeeping
(connected state, receipts it waits for, the DISCONNECT receipt) is unchanged. Because
stomp.py's heart-beat monitor only hears about frames it is told of, each read that
brought frames also tells it the broker is alive; otherwise a consumer busy with
MESSAGE frames (brokers send no heart-beats while data flows) would be declared dead.
That one call per read is also all a heart-beat EOL needs: stomp.py's ``notify`` per EOL
sorts its listeners and logs each that has no ``on_heartbeat``, and RabbitMQ ends every
MESSAGE with an EOL (9% of a consumer's receiver thread, measured).

A broker that sends bytes that are not STOMP (or a frame larger than ``max_frame_bytes``)
leaves the stream unusable past that point: the handler's ``on_stream_error`` is told
what was wrong, and the connection is closed the way a dropped socket is, so failover
(if enabled) reconnects and the broker redelivers what was not acknowledged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jmspy import twins
from jmspy.idle_spin import DEFAULT_IDLE_SPIN_US, IdleSpin
from jmspy.reading_lease import collect_woken, stop_collecting
from jmspy.stomp_frames import (
    DEFAULT_MAX_FRAME_BYTES,
    CodecLimits,
    FrameError,
    Heartbeat,
    header_dict,
)

from ..reading_turn import ReadingTurn
from . import stomppy_private

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "FrameReader", "install"]

_codec = twins.stomp_codec

# DEFAULT_MAX_FRAME_BYTES (re-exported): the largest message body a stomp:// client accepts
# unless the URL says otherwise (``max_frame_bytes``): ActiveMQ's 100 MiB, so a message other
# brokers take is read (the bundled broker takes 10 MiB frames unless configured otherwise).

MessageHandler = Callable[[dict[str, str], bytes], None]
ErrorHandler = Callable[[str], None]


class FrameReader:
    """Reads one stomp.py transport's socket with jmspy's codec.

    ``on_message(headers, body)`` runs on stomp.py's receiver thread for each MESSAGE and
    must not raise (the transport's handler converts and buffers, nothing more);
    ``on_stream_error(text)`` is called once if the bytes stop being STOMP.
    """

    __slots__ = ("_alive", "_closed_exc", "_interrupted", "_on_error", "_on_message",
                 "_parser", "_transport", "_utils_frame", "turn")

    def __init__(
        self,
        transport: Any,
        version: str,
        on_message: MessageHandler,
        on_stream_error: ErrorHandler,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        idle_spin_us: int = DEFAULT_IDLE_SPIN_US,
        one_in_flight: Callable[[], bool] | None = None,
    ) -> None:
        from stomp import exception as stomp_exception
        from stomp import utils as stomp_utils

        self._transport = transport
        self._parser = _codec.FrameParser(
            version, CodecLimits(max_frame_bytes=max_frame_bytes), server=False)
        self._on_message = on_message
        self._on_error = on_stream_error
        self._closed_exc = stomp_exception.ConnectionClosedException
        self._interrupted = stomp_exception.InterruptedException
        self._utils_frame = stomp_utils.Frame
        listener = transport.get_listener("protocol-listener")
        # stomp.py's heart-beat monitor (absent when heart-beats are off)
        self._alive: Callable[[], None] | None = getattr(listener, "on_heartbeat", None)
        #: who reads the socket now: stomp.py's receiver thread or a session it lent it to
        self.turn = ReadingTurn(self._read_once, lambda: transport.socket,
                                lambda: bool(transport.running), IdleSpin(idle_spin_us),
                                one_in_flight)

    def read_frames(self) -> None:
        """One ``recv`` and every frame it completes; stomp.py's loop calls it again.

        Mirrors what stomp.py's own step does with the socket: an interrupted read is
        retried by the loop, an empty read (or a socket error) means the broker closed
        the connection, which stomp.py handles by raising ConnectionClosedException.
        While a session thread has the turn to read (:mod:`..reading_turn`), this waits
        for it to come back instead, and raises what that thread saw.
        """
        t = self._transport
        if not t.running:
            return
        turn = self.turn
        error = turn.wait_home() if turn.lent() else self._read_once(lend=True)
        if error is not None:
            raise error

    def need_reader(self) -> None:
        """A thread is about to wait for a frame (see :meth:`ReadingTurn.need_reader`)."""
        self.turn.need_reader()

    def _read_once(self, *, lend: bool = False) -> BaseException | None:
        """One ``recv`` and its frames, on whichever thread has the turn; returns the
        exception for stomp.py's loop instead of raising it. ``lend``: stomp.py's receiver
        thread, which lends the turn to a session it woke (none is woken by a holder's
        reads: it keeps the turn)."""
        t = self._transport
        try:
            data = t.receive()
        except self._interrupted:
            return None
        except Exception:
            data = b""
        if not data:
            if not t.blocking:  # TLS: no application data yet
                return None
            closed: BaseException = self._closed_exc()
            return closed
        parser = self._parser
        woken = collect_woken() if lend else None
        try:
            parser.feed(data)
            while True:
                frame = parser.next_frame()
                if frame is None:
                    break
                if isinstance(frame, Heartbeat):  # the HEARTBEAT singleton
                    continue  # the broker is alive: ``alive()`` below says so
                if frame.command == "MESSAGE":
                    self._on_message(header_dict(frame.headers), frame.body)
                else:
                    t.process_frame(
                        self._utils_frame(frame.command, header_dict(frame.headers), frame.body),
                        b"")
        except FrameError as exc:
            self._on_error(
                f"the broker sent bytes that are not a valid STOMP frame ({exc}); the "
                "connection is closed and, with reconnect enabled, opened again")
            broken: BaseException = self._closed_exc()
            broken.__cause__ = exc
            return broken
        finally:
            if lend:
                stop_collecting()
        alive = self._alive
        if alive is not None:
            alive()
        if woken:
            self.turn.lend(woken)
        return None


def install(conn: Any, reader_factory: Callable[[Any], FrameReader]) -> FrameReader | None:
    """Put a :class:`FrameReader` in place of stomp.py's frame reading on ``conn`` (before
    it connects). Returns None, leaving stomp.py's reading in place, off a tested
    stomp.py (:mod:`.stomppy_private`) or if it reads through a TLS I/O queue
    (non-blocking transport)."""
    transport = getattr(conn, "transport", None)
    if transport is None or not stomppy_private.enabled():  # decided before a reader is made
        return None
    if not getattr(transport, "blocking", False) or not hasattr(transport, "receive"):
        return None
    reader = reader_factory(transport)
    return reader if stomppy_private.replace_read_step(transport, reader.read_frames) else None
