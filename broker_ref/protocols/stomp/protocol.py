"""A sans-I/O STOMP 1.0/1.1/1.2 server session over one core connection (h11 style).

``receive_data(bytes)`` parses with the shared codec and acts on the broker core;
``data_to_send()`` returns the bytes to write. No sockets, no clock of its own, no
threads: the host (:mod:`.server`) owns I/O, heart-beat timers and back-pressure, and
calls everything from one thread, which keeps the core single-threaded.

Flow control: see :mod:`.subscription` for why the credit bookkeeping looks the way it
does (the Open MQ window, backlogs, at-most-once queues, ``ack:auto``, congestion).

Producer flow control: the SENDs and COMMITs the broker holds, their withheld receipts and
a DISCONNECT waiting for them are counted by :class:`~.held.HeldSends`.

Protocol errors send an ERROR frame (``message`` header plus a body saying what to do)
and set :attr:`closing`; the host writes what is pending and closes the socket.

Fair turns: a host that serves many clients on one thread sets :attr:`StompSession.turn_frames`
(and ``turn_bytes``, ``turn_clock``); each call then acts on at most that many frames,
bodies of that many bytes, or frames of the full path for ``turn_seconds``, and leaves the
rest buffered, saying so in :attr:`StompSession.input_waiting`, so that one client's flood
of SENDs cannot hold every other client's frames (and the commits their RECEIPTs wait for)
until the whole flood is handled. ``receive_data(b"")`` acts on the next batch.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from jmspy import twins
from jmspy.stomp_frames import HEARTBEAT, CodecLimits, Frame, FrameError, header_dict
from jmspy.wire.error_codes import ERROR_CODE_HEADER
from jmspy.wire.headers import BROKER_NAME, LEASES_DESTINATION

from ...core import BodyType, Broker, BrokerError, Delivery, ServerConnection, ServerMessage
from ...core.security import Principal
from ...core.windows import ClientWindow
from . import mapping
from .connect import CONNECTION_FLOW_LIMIT, LoginRequest, read_connect
from .credit import SessionCredit
from .destinations import SessionDestinations
from .held import HELD_BYTES_READ_LIMIT, HELD_FRAMES_READ_LIMIT, HeldSend, HeldSends, send_timeout
from .leasing import lease_request
from .mapping import HeaderError
from .message_frame import encode_message
from .refusals import CLOSED, ProtocolError, check_echoable, frame_problem
from .send_path import SessionRecord
from .settling import SessionSettling
from .subscribing import SessionSubscribing
from .subscription import AUTO, Subscription
from .transactions import SessionTransactions

__all__ = ["HELD_BYTES_READ_LIMIT", "HELD_FRAMES_READ_LIMIT", "TURN_BYTES", "TURN_FRAMES",
           "TURN_SECONDS", "HeldSend", "ProtocolError", "StompSession"]

_codec = twins.stomp_codec

#: Fair turns (the asyncio host's bounds): frames of one client acted on per call, the
#: body bytes after which a call stops early, and the seconds of full-path frames (a
#: persistent SEND is a store write, ten times a common SEND) after which it stops too.
#: 64 common SENDs are about 0.1 ms of the broker's work, 0.3 ms about 15 persistent
#: ones: another client's frame waits about that long for a flooding one. Shorter turns
#: cost the flood more (each one a loop callback, and each prober's RECEIPT a commit it
#: shares): 0.15 ms cut a flood's rate beside a prober from about 24k to 15k msgs/s for
#: round trips of 0.5 ms instead of 0.7 (benchmarks/flood_round_trip.py).
TURN_FRAMES = 64
TURN_BYTES = 64 * 1024
TURN_SECONDS = 0.000_3
#: Bytes a connection's parser may take in before it is replaced at a frame boundary: its
#: buffer keeps the size of the biggest frame it read, so an idle connection that once
#: sent a 10 MiB frame held 10 MiB outside the input budget (40 such: 390 MB of RSS).
PARSER_RENEW_BYTES = 1024 * 1024


class StompSession(SessionRecord):
    """One client's STOMP session. Implements the core's ``SessionCallback``.

    Its :class:`~.send_path.SessionRecord` base holds the fields the common SEND reads
    (``send_common``: the twin that takes most SENDs in one call)."""

    def __init__(
        self,
        broker: Broker,
        *,
        limits: CodecLimits | None = None,
        heartbeat_ms: int = 0,
    ) -> None:
        self.broker = broker
        self.version = "1.0"
        self.heartbeat_ms = heartbeat_ms
        #: negotiated intervals in ms (0 = off): server -> client, client -> server
        self.send_interval = self.recv_interval = 0
        self.connected = False
        self.closing = False  #: no more input is read; the host closes after writing
        self._limits = limits or CodecLimits()
        self._parser: Any = _codec.FrameParser("1.2", self._limits, True)
        self._fed = 0  # bytes the parser took in since it was made (PARSER_RENEW_BYTES)
        self._out: list[bytes] = []
        #: headers the RECEIPT of the frame being handled carries (a lease request's)
        self._answer: list[tuple[str, str]] = []
        self._conn: ServerConnection | None = None
        self._subs: dict[str, Subscription] = {}
        self._by_consumer: dict[int, Subscription] = {}
        self._msg_seq = itertools.count(1)
        self._id_prefix = ""  # "ID:<broker>-<run>-<connection>-", set on CONNECT
        #: Set by a host that authenticates off its event loop: CONNECT then stops at
        #: :attr:`login_request` (no frame after it is acted on) until the host calls
        #: :meth:`login_done` or :meth:`refuse`.
        self.defer_login = False
        self.login_request: LoginRequest | None = None
        self._destinations = SessionDestinations(
            lambda: self._core.create_temporary_queue())
        self._transactions = SessionTransactions()  # BEGIN, COMMIT, ABORT
        self._credit = SessionCredit()
        self._tag_owner: dict[int, Subscription] = {}  # unacked delivery tag -> subscription
        self._subscribing = SessionSubscribing(  # SUBSCRIBE, UNSUBSCRIBE
            self._subs, self._by_consumer, self._tag_owner, self._destinations, self._credit)
        self._settling = SessionSettling(  # ACK, NACK (and NACK batches)
            self._subs, self._tag_owner, self._credit, self._transactions)
        self.frames_in = 0
        self._held = HeldSends()  # SENDs/COMMITs parked by producer flow control
        #: called when output appears outside receive_data (another connection's send,
        #: a timer): the host schedules a flush. Output made *inside* receive_data (a
        #: client's ACK refilling its own window) does not call it: the host writes what
        #: receive_data left anyway, and a wakeup there would cost a second, empty flush.
        self.wakeup: Callable[[], None] | None = None
        self._receiving = False
        #: Fair turns (module docstring): frames one call acts on (0: all there are) and
        #: the body bytes after which it stops; set by a host that serves other clients
        #: on the same thread.
        self.turn_frames = 0
        self.turn_bytes = TURN_BYTES
        self.turn_seconds = TURN_SECONDS
        #: the host's clock for ``turn_seconds`` (None: no time bound)
        self.turn_clock: Callable[[], float] | None = None
        #: the last call stopped at its turn budget: frames may still be buffered, and
        #: ``receive_data(b"")`` acts on them (the host calls it on a later loop turn)
        self.input_waiting = False

    # ------------------------------------------------------------------ host interface

    def receive_data(self, data: bytes) -> None:
        """Parse and act on ``data`` (after what is still buffered), up to the turn budget
        when one is set (:attr:`input_waiting`). Never raises for client mistakes."""
        if self.closing:
            return
        parser = self._parser
        parser.feed(data)
        self._fed += len(data)
        self._receiving = True
        try:
            self._process(parser)
        finally:
            self._receiving = False
            if self.closing:
                self.connection_lost()
            elif self._fed > PARSER_RENEW_BYTES and not parser.buffered:
                self._renew_parser()

    def _renew_parser(self) -> None:
        """A fresh parser at a frame boundary: the old one's buffer, sized by the biggest
        frame it read, is freed now rather than when more input comes (or never)."""
        self._parser = _codec.FrameParser("1.2", self._limits, True)
        if self.connected:
            self._parser.set_version(self.version)
        self._fed = 0

    def _process(self, parser: Any) -> None:
        next_frame = parser.next_frame
        held = self._held
        budget = self.turn_frames  # 0: no bound
        room = self.turn_bytes
        taken = 0
        clock = self.turn_clock if budget else None
        deadline = clock() + self.turn_seconds if clock is not None else 0.0
        self.input_waiting = False
        while not self.closing and self.login_request is None and not held.disconnecting:
            if budget and (taken >= budget or room <= 0):
                # the rest on the host's next turn; a spent time bound with nothing
                # buffered leaves nothing waiting (the host would pause for no frame)
                self.input_waiting = parser.buffered > 0
                return
            try:
                frame = next_frame()
            except FrameError as exc:
                self._error(*frame_problem(exc, self._limits))
                return
            if frame is None:
                return
            if frame is HEARTBEAT:
                continue
            self.frames_in += 1
            taken += 1
            room -= len(frame.body)
            try:
                # Every step reads the same header dict: first occurrence wins (STOMP
                # 1.2), built once per frame instead of one scan of the list per lookup.
                headers = header_dict(frame.headers)
                receipt = headers.get("receipt")
                if receipt is not None:
                    check_echoable(self.version, "receipt", receipt)
                if (frame.command == "SEND" and self.connected
                        and self.send_common(frame, headers, receipt)):
                    continue  # the common SEND, taken whole (send_path.py)
                self._dispatch(frame, headers)
                if clock is not None and clock() >= deadline:
                    taken = budget  # this turn's time is spent: the rest on the next
            except ProtocolError as exc:
                self._error(exc.message, exc.detail, frame.header("receipt"))
            except HeaderError as exc:
                self._error(str(exc), exc.detail, frame.header("receipt"))
            except BrokerError as exc:
                self._error(exc.message.split(";")[0][:200], exc.message,
                            frame.header("receipt"), code=exc.code)
            except FrameError as exc:  # a reply this version cannot carry: not a traceback
                self._error("unencodable reply", f"{exc}. Send header values this STOMP "
                            f"version can carry back. {CLOSED}")

    def data_to_send(self) -> bytes:
        """Bytes to write now. Call :meth:`written` once they are handed to the socket."""
        out = self._out
        if not out:
            return b""
        self._out = []
        return b"".join(out)

    def written(self) -> None:
        """The bytes from :meth:`data_to_send` were handed to the socket: ack:auto windows
        (and byte windows) are refilled by the frames written. The host calls this *after*
        its write, so a write that congests the socket pauses credit first and one window
        per subscription is the most that can pile up."""
        self._credit.written()

    def has_output(self) -> bool:
        return bool(self._out)

    @property
    def input_buffered(self) -> int:
        """Bytes received and not yet acted on: the frame being read, and frames read
        but held back (behind a login, or by producer flow control). The host counts
        them against the broker's input budget."""
        return int(self._parser.buffered)

    @property
    def reading_held(self) -> bool:
        """The host should stop reading this client: its SENDs without a receipt wait in
        the broker past :data:`HELD_FRAMES_READ_LIMIT` / :data:`HELD_BYTES_READ_LIMIT`.
        Reading resumes (and buffered input is parsed) when they went through."""
        return self._held.reading_held

    @property
    def held_sends(self) -> int:
        """SENDs and COMMITs of this session that producer flow control holds."""
        return self._held.count

    def pause_credit(self) -> None:
        """The socket is congested: grant no credit until :meth:`resume_credit`."""
        self._credit.pause()

    def resume_credit(self) -> None:
        self._credit.resume()

    def connection_lost(self) -> None:
        """Socket gone (or session over): roll back, cancel, free. Idempotent."""
        self.closing = True
        if self._fed:  # the frame being read (up to max-frame-bytes), or the buffer a big
            # frame left, goes now, not when the cyclic GC reaches this session: no more
            # input is read anyway
            self._parser = _codec.FrameParser("1.2", self._limits, True)
            self._fed = 0
        conn, self._conn = self._conn, None
        self._credit.detach()  # frames still being written refill nothing any more
        if conn is not None and not conn.closed and not self.broker.closed:
            # SENDs it wrote that producer flow control holds still go through: a STOMP
            # client that does not wait for its DISCONNECT's RECEIPT (stomp.py's default
            # disconnect()) closes with them parked, and no ERROR could tell it otherwise
            conn.close(keep_parked_sends=True)

    # ------------------------------------------------------------------ SessionCallback

    def client_window(self, consumer_id: int) -> ClientWindow | None:
        """A consumer's window as its client asked (core/windows.py: WindowReporter)."""
        sub = self._by_consumer.get(consumer_id)
        return None if sub is None else sub.client_window()

    def deliver(self, delivery: Delivery) -> None:
        self.deliver_many(delivery.consumer_id, delivery.delivery_tag, [delivery.message],
                          [delivery.delivery_count])

    def deliver_many(self, consumer_id: int, first_tag: int, messages: list[ServerMessage],
                     delivery_counts: list[int]) -> None:
        """A run of deliveries to one subscription (``BatchSessionCallback``): the i-th
        message has tag ``first_tag + i``. One call and one lookup per run, not per
        message; each becomes one MESSAGE frame, exactly as :meth:`deliver` would."""
        sub = self._by_consumer.get(consumer_id)
        if sub is None:
            return
        out = self._out
        if not out and not self._receiving and self.wakeup is not None:
            self.wakeup()
        version = self.version
        temps = self._destinations.local_temps
        auto = sub.ack_mode == AUTO
        # An ack id only where the client will use one: STOMP 1.2's client modes (1.0 and
        # 1.1 ACK by message-id; ActiveMQ 5 and RabbitMQ send no ack header there either).
        with_ack = not auto and version == "1.2"
        self._credit.delivered(sub, len(messages))
        tag = first_tag
        for msg, count in zip(messages, delivery_counts, strict=True):
            reply = (mapping.render_destination(msg.reply_to[0], msg.reply_to[1], temps)
                     if msg.reply_to is not None else None)
            data = encode_message(
                msg, mapping.render_destination(msg.kind, msg.destination, temps), sub.id,
                str(tag) if with_ack else "", count, reply, version)
            if not auto:
                sub.delivered(tag, msg.message_id, len(data))
                self._tag_owner[tag] = sub
            out.append(data)
            tag += 1

    def send_done(self, ticket: object, error: BrokerError | None) -> None:
        """A held SEND or COMMIT went through (its RECEIPT now) or failed (an ERROR naming
        the limit, then close: STOMP ends a session after an ERROR; nothing was stored)."""
        assert isinstance(ticket, HeldSend)
        held = self._held
        held.released(ticket)
        if self.closing:
            return
        if self.wakeup is not None:
            self.wakeup()
        if error is not None:
            self._error(error.message.split(";")[0][:200], error.message, ticket.receipt,
                        code=error.code)
            return
        if ticket.receipt is not None:
            self._emit(Frame("RECEIPT", [("receipt-id", ticket.receipt)]))
        if held.disconnect_due():
            self._disconnected()

    def consumer_closed(self, consumer_id: int, reason: str) -> None:
        sub = self._by_consumer.pop(consumer_id, None)
        if sub is not None:
            sub.closed = True
            self._settling.forget(sub)  # the core took its deliveries back already
            self._subs.pop(sub.id, None)
            self._error("subscription closed by the broker",
                        f"subscription {sub.id!r} was closed by the broker: {reason}")

    # ------------------------------------------------------------------ frames

    def _dispatch(self, frame: Frame, headers: dict[str, str]) -> None:
        command = frame.command
        if not self.connected:
            if command in ("CONNECT", "STOMP"):
                self._on_connect(frame)
                return
            raise ProtocolError("not connected", f"the first frame must be CONNECT or STOMP, "
                                f"got {command}; send CONNECT with accept-version first")
        handler = self._handlers.get(command)
        if handler is None:
            raise ProtocolError(f"unexpected {command} frame", f"{command} is not valid "
                                "after CONNECTED; a session connects once")
        if command == "NACK":
            if self.version == "1.0":
                raise ProtocolError("NACK needs STOMP 1.1", "NACK does not exist in STOMP "
                                    "1.0; connect with accept-version:1.1 or 1.2")
        elif self._settling.holding:  # a NACK batch ends at the client's next other frame
            self._settling.end_batch(self._core)
        handler(self, frame, headers)
        if self._held.take_withheld():  # parked by producer flow control: send_done answers
            return
        receipt = headers.get("receipt")
        if receipt is not None and not self.closing and command != "SUBSCRIBE":
            answer, self._answer = self._answer, []
            self._emit(Frame("RECEIPT", [("receipt-id", receipt), *answer]))
        if command == "DISCONNECT":
            self.closing = True

    def _emit(self, frame: Frame) -> None:
        self._out.append(_codec.encode_frame(frame, self.version))

    def _error(self, message: str, detail: str, receipt: str | None = None,
               code: str | None = None) -> None:
        """An ERROR frame, then close. ``code``: the refusing broker error's stable code,
        in the ``jmspy-error`` header, so the jmspy client maps it to its JMS exception
        class without reading the text (:mod:`jmspy.wire.error_codes`)."""
        headers = [("message", message.replace("\n", " ").replace("\r", " ")),
                   ("content-type", "text/plain")]
        if code is not None:
            headers.append((ERROR_CODE_HEADER, code))
        if receipt is not None:
            headers.append(("receipt-id", receipt.replace("\n", " ").replace("\r", " ")))
        try:
            data = _codec.encode_frame(Frame("ERROR", headers, detail.encode()), self.version)
        except FrameError:
            data = _codec.encode_frame(Frame("ERROR", headers[:2], detail.encode()), "1.2")
        self._out.append(data)
        self.closing = True  # receive_data (or the host) then closes the core connection

    def _on_connect(self, frame: Frame) -> None:
        request = read_connect(frame)
        if isinstance(request, Frame):  # no version in common: refused
            self._out.append(_codec.encode_frame(request, "1.0"))
            self.closing = True
            return
        policy = self.broker.security
        if self.defer_login and policy is not None and policy.enabled:
            self.login_request = request  # the host authenticates, then login_done()
            return
        self._finish_connect(request, None)

    def login_done(self, principal: Principal) -> None:
        """The host authenticated :attr:`login_request` (off its event loop): connect,
        answer CONNECTED, then act on the frames that arrived meanwhile."""
        request, self.login_request = self.login_request, None
        if request is None or self.closing:
            return
        try:
            self._finish_connect(request, principal)
        except BrokerError as exc:
            self._error(exc.message.split(";")[0][:200], exc.message, code=exc.code)
        if not self.closing:
            self._process(self._parser)
        if self.closing:
            self.connection_lost()

    def refuse(self, message: str, detail: str, code: str | None = None, *,
               replacing: bool = False, receipt: str | None = None) -> None:
        """The host refuses this client (failed login, connection limits, CONNECT not
        completed in time): an ERROR frame, then the host closes. ``code``: the broker
        error's code, when a broker error is why. ``replacing``: the host dropped the
        output not yet written (an ERROR of this session's own among it), so the ERROR
        is made even when the session is already closing. ``receipt``: the receipt the
        ERROR answers (``receipt-id``), if it answers one."""
        self.login_request = None
        if not self.closing or replacing:
            self._error(message, detail, receipt, code=code)
        self.connection_lost()

    def _finish_connect(self, request: LoginRequest, principal: Principal | None) -> None:
        version, cx, cy = request.version, request.cx, request.cy
        self._conn = self.broker.connect(
            self,
            client_id=request.client_id,
            user=request.user,
            password=request.password,
            principal=principal,
            flow_limit=request.flow_limit or None,
        )
        self.version = version
        self._id_prefix = (
            f"ID:{self.broker.name}-{self.broker.run_id}-{self._conn.connection_id}-")
        self._parser.set_version(version)
        self.connected = True
        headers = [("version", version), ("server", BROKER_NAME),
                   ("session", f"{self.broker.name}-{self._conn.connection_id}")]
        self._credit.attach(self._conn, request.flow_limit)
        if request.flow_limit:  # echoed: the client knows the cap is enforced here
            headers.append((CONNECTION_FLOW_LIMIT, str(request.flow_limit)))
        if version != "1.0":
            sx = self.heartbeat_ms
            self.send_interval = max(sx, cy) if sx and cy else 0
            self.recv_interval = max(cx, sx) if sx and cx else 0
            headers.append(("heart-beat", f"{sx},{sx}"))
        self._emit(Frame("CONNECTED", headers))

    @property
    def _core(self) -> ServerConnection:
        conn = self._conn
        if conn is None:
            raise ProtocolError("not connected", "the session is closed; reconnect")
        return conn

    def _on_send(self, frame: Frame, headers: dict[str, str]) -> None:
        dest = headers.get("destination")
        if dest == mapping.STATS_DESTINATION:
            self._send_stats(headers)
            return
        if dest == LEASES_DESTINATION:
            self._answer = lease_request(headers, self._core)
            return
        conn = self._core
        destinations = self._destinations
        message = mapping.to_server_message(
            headers, frame.body, destinations.target(dest), self._next_message_id(),
            self.broker.now(), destinations.reply,
        )
        ticket = HeldSends.ticket(headers, len(frame.body))
        if not conn.send(message, self._transactions.named(headers), ticket=ticket,
                         timeout_ms=send_timeout(headers)):
            self._held.parked(ticket)

    def _next_message_id(self) -> str:
        return self._id_prefix + str(next(self._msg_seq))

    def _send_stats(self, headers: dict[str, str]) -> None:
        reply = headers.get("reply-to")
        if not reply:
            raise ProtocolError("stats request without reply-to", "SEND to "
                                f"{mapping.STATS_DESTINATION} needs a reply-to header naming "
                                "where the JSON stats message should go")
        kind, name = self._destinations.reply(reply)
        conn = self._core  # its view holds the same ``admin`` check as every other path
        body = json.dumps([s.as_dict() for s in conn.all_stats()])
        usage = {f"jmspy-{k}": v for k, v in self.broker.usage().items() if v is not None}
        if name in self._destinations.local_temps:  # made for this answer: say which one
            usage[mapping.STATS_REPLY_HEADER] = name
        conn.route_admitted(ServerMessage(
            message_id=self._next_message_id(),
            kind=kind, destination=name, body_type=BodyType.TEXT, body=body,
            persistent=False, timestamp=self.broker.now(),
            correlation_id=headers.get("correlation-id"),
            properties={"content-type": "application/json", **usage}, size=len(body) + 64))

    def _on_subscribe(self, frame: Frame, headers: dict[str, str]) -> None:
        self._subscribing.subscribe(frame, headers, self._core, self.broker, self.version,
                                    self._out)

    def _on_unsubscribe(self, frame: Frame, headers: dict[str, str]) -> None:
        self._subscribing.unsubscribe(headers, self._core)

    def _on_ack(self, frame: Frame, headers: dict[str, str]) -> None:
        self._settling.ack(frame, headers, self._core, self.version)

    def _on_nack(self, frame: Frame, headers: dict[str, str]) -> None:
        self._settling.nack(frame, headers, self._core, self.version)

    def _on_begin(self, frame: Frame, headers: dict[str, str]) -> None:
        self._transactions.begin(self._core, headers)

    def _on_commit(self, frame: Frame, headers: dict[str, str]) -> None:
        self._end_tx(frame, headers, True)

    def _on_abort(self, frame: Frame, headers: dict[str, str]) -> None:
        self._end_tx(frame, headers, False)

    def _end_tx(self, frame: Frame, headers: dict[str, str], commit: bool) -> None:
        """COMMIT or ABORT (:mod:`.transactions`); the windows of what was acknowledged
        in the transaction refill."""
        credit = self._credit
        for sub, n in self._transactions.end(self._core, frame.command, headers, commit,
                                             self._held):
            credit.consumed(sub, n)

    def _on_disconnect(self, frame: Frame, headers: dict[str, str]) -> None:
        """The receipt is sent by _dispatch, then the session ends; while sends are held
        it waits for them (the client sent them before DISCONNECT: they are not lost)."""
        self._held.disconnect(headers.get("receipt"))

    def _disconnected(self) -> None:
        receipt = self._held.disconnect_receipt
        if receipt is not None:
            self._emit(Frame("RECEIPT", [("receipt-id", receipt)]))
        self.closing = True

    _handlers = {
        "SEND": _on_send,
        "SUBSCRIBE": _on_subscribe,
        "UNSUBSCRIBE": _on_unsubscribe,
        "ACK": _on_ack,
        "NACK": _on_nack,
        "BEGIN": _on_begin,
        "COMMIT": _on_commit,
        "ABORT": _on_abort,
        "DISCONNECT": _on_disconnect,
    }
