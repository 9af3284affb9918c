"""RECEIPTs of ``stomp://``: a frame sent with a ``receipt`` header, and the wait for the
broker's answer, so that what the broker refuses (an ERROR frame) or never confirms (the
connection dropped, or the time ran out) fails the call that sent it.

One :class:`Receipts` per transport, which owns every receipt it waits for, the ERROR
frames that answer them and the window below; SUBSCRIBE (``create_consumer``), COMMIT,
DISCONNECT, the management requests of :mod:`.admin` and persistent SENDs use it.

Persistent sends (JMS: a persistent ``send()`` returns once the broker has the message)
carry a receipt too, but paying one round trip per message is what asynchronous sends
exist to avoid, so they go through a *window* (the factory property
``persistentSendWindow``, W): ``send()`` writes its frame, then waits until fewer than W
persistent sends are unconfirmed. W = 1 (the default) is the JMS contract: each send
returns after its own RECEIPT, and the broker's refusal is raised by that send. With
W > 1 a refusal is raised by the next send, commit or close of the connection.
Transacted sends do not wait: COMMIT (receipted) is their point of confirmation, as on
ActiveMQ, whose transacted sends are asynchronous too.

A refusal becomes the JMS class that names it (:func:`refusal`): jmspy broker names the
refusing error's code in a ``jmspy-error`` header, mapped through the table of
:mod:`.broker_errors`; for other brokers, permissions -> ``JMSSecurityException`` and
limits -> ``ResourceAllocationException`` by their ERROR text.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jmspy import errors
from jmspy.wire.error_text import error_text

from ..broker_errors import ERROR_CODE_HEADER, class_for_code
from .async_sends import AsyncSends

__all__ = ["CHECKPOINT_BYTES", "CHECKPOINT_SENDS", "Receipts", "refusal"]

log = logging.getLogger("jmspy.transport.stomp")

#: A non-persistent send carries a receipt once per this many sends or bytes (see
#: :meth:`Receipts.send_checkpointed`); at most two checkpoints' worth is unconfirmed, and
#: jmspy broker stops reading a client only past 1000 held sends or 8 MiB without
#: receipts, so a client of it is always read (its ACKs arrive). Why not fewer: ActiveMQ
#: answers a receipted SEND in order behind the ones before it, so each checkpoint makes
#: the producer wait for the broker to catch up; every 400 sends instead of every 200
#: was 1.15x the end-to-end rate of a jmspy producer and consumer on ActiveMQ 5 (window
#: 1000, medians of six interleaved rounds; issue 17).
CHECKPOINT_SENDS = 400
CHECKPOINT_BYTES = 1024 * 1024
#: How much longer than ``sendTimeout`` a send waits for the broker's own answer.
SEND_TIMEOUT_GRACE = 5.0
#: How long a call failed by an ERROR waits for the close that follows it (``_await_close``).
ERROR_CLOSE_WAIT = 1.0

#: An ERROR frame as received: its headers and its body as text.
ErrorFrame = tuple[dict[str, str], str]

#: ERROR texts of a permission refusal: jmspy broker ("user 'x' may not send to ..."),
#: ActiveMQ ("User x is not authorized to write to: queue://..."), RabbitMQ
#: ("access_refused", "access to queue 'x' in vhost '/' refused for user 'y'").
_SECURITY = re.compile(
    r"not authori[sz]ed|access[_ ]refused|access to .* refused|permission|security"
    r"|\buser\b.*\bmay not\b", re.IGNORECASE | re.DOTALL)
#: ERROR texts of a limit: jmspy broker ("frame body over the limit: [limits]
#: max-frame-bytes = N", destination limits), ActiveMQ (memory / store usage limits,
#: "exceeded"), RabbitMQ (frame or queue length limits).
_LIMIT = re.compile(
    r"\blimits?\b|too (?:large|big|long)|exceed|memory|quota|resource|max-",
    re.IGNORECASE)


def refusal(where: str, what: str, headers: Mapping[str, str], text: str
            ) -> errors.JMSException:
    """The exception for an ERROR frame that answered ``what`` (e.g. "the request")."""
    detail = error_text(headers, text)
    cls: type[errors.JMSException] = errors.JMSException
    coded = class_for_code(headers.get(ERROR_CODE_HEADER))
    if coded is not None:
        cls = coded
    elif _SECURITY.search(detail):
        cls = errors.JMSSecurityException
    elif _LIMIT.search(detail):
        cls = errors.ResourceAllocationException
    return cls(f"the STOMP broker at {where} refused {what}: {detail}")


@dataclass(eq=False, slots=True)
class _InFlight:
    """One persistent SEND whose RECEIPT has not come yet."""

    receipt: str
    event: threading.Event
    conn: Any
    what: str
    #: the transport's last ERROR when this was sent: only a newer one can be its answer
    error_before: ErrorFrame | None


class Receipts:
    """Receipts of one transport. ``where`` names the broker in errors; ``current()``
    returns the live stomp.py connection (None while down): a receipt asked for on another
    connection than the current one can never come."""

    def __init__(self, where: str, current: Callable[[], Any],
                 properties: Mapping[str, Any],
                 need_reader: Callable[[], None] = lambda: None) -> None:
        self.where = where
        self._current = current
        #: called before a wait for a frame: a session thread that has the turn to read
        #: the socket but is busy in a listener gives it back now (transports/reading_turn.py)
        self.need_reader = need_reader
        self._receipts: dict[str, threading.Event] = {}
        #: receipt id -> the RECEIPT's headers, for the receipts whose answer carries
        #: news (a SUBSCRIBE's: the destination's flow limit); see :meth:`answer`
        self._answers: dict[str, dict[str, str] | None] = {}
        #: receipt id -> the ERROR frame that answered it (set by the receiver thread)
        self._refused: dict[str, ErrorFrame] = {}
        #: the last ERROR frame of the connection (the brokers close after one); reset
        #: before each request, whose answer only a later ERROR can be
        self.last_error: ErrorFrame | None = None
        #: the last ERROR of the current connection, never reset by a request: why it
        #: closed, for every call that meets the drop (reset when a connection opens, and
        #: by a RECEIPT after it: a broker that answers again did not close for it)
        self.connection_error: ErrorFrame | None = None
        self._send_window = int(properties.get("persistentSendWindow", 1))
        self._in_flight: deque[_InFlight] = deque()
        self._window_lock = threading.Lock()
        #: closeTimeout: how long close() waits for the broker's answers
        self.drain_timeout = float(properties.get("closeTimeout", 5)) or 30.0
        #: sendTimeout (ms, 0 = as long as it takes): how long a send may wait for its
        #: RECEIPT while the broker applies producer flow control
        self.send_timeout_ms = int(properties.get("sendTimeout", 30_000))
        #: non-persistent sends since the last checkpoint (count, bytes)
        self._unchecked = 0
        self._unchecked_bytes = 0
        #: the sends whose outcome is a callback (Transport.send_async)
        self.async_sends = AsyncSends(current, lambda: self.where)

    @property
    def sends_in_flight(self) -> bool:
        """Persistent sends are waiting for their RECEIPT."""
        return bool(self._in_flight)

    def forget(self, receipt: str) -> None:
        """Stop waiting for ``receipt`` (its wait timed out elsewhere)."""
        self._receipts.pop(receipt, None)
        self._answers.pop(receipt, None)

    def answer(self, receipt: str) -> dict[str, str]:
        """The headers of ``receipt``'s RECEIPT (asked for with ``keep_answer``; empty
        when it did not come), forgotten once read."""
        return self._answers.pop(receipt, None) or {}

    def on_receipt(self, receipt_id: str, headers: dict[str, str] | None = None) -> None:
        # the broker went on after its last ERROR (ActiveMQ keeps a connection after
        # refusing a send): that ERROR is not why the connection may end later
        self.connection_error = None
        if self.async_sends.answered(receipt_id):
            return
        if receipt_id in self._answers:
            self._answers[receipt_id] = headers or {}
        event = self._receipts.pop(receipt_id, None)
        if event is not None:
            event.set()

    def on_error(self, headers: dict[str, str], text: str) -> None:
        """An ERROR frame (receiver thread): when it names a receipt we wait for, that
        call fails with it rather than with whatever else is waiting."""
        self.last_error = self.connection_error = (headers, text)
        receipt = headers.get("receipt-id")
        if self.async_sends.refused(
                receipt, lambda what: refusal(self.where, what, headers, text)):
            return
        event = self._receipts.pop(receipt, None) if receipt else None
        if event is not None:
            assert receipt is not None
            self._refused[receipt] = (headers, text)
            event.set()

    def refusal_behind(self, conn: Any, error_before: ErrorFrame | None, what: str,
                       timeout: float = 1.0) -> errors.JMSException | None:
        """A write on ``conn`` failed: the refusal of the broker's ERROR that explains it,
        or None. A broker refuses a frame it will not read to the end (one over its frame
        limit) with an ERROR and closes, so the write fails on a closed socket; the ERROR
        is the news, not the errno. The receiver thread handles the ERROR before it sees
        the end of the stream, so once ``conn`` is down any such ERROR is here; this waits
        up to ``timeout`` for that (jmspy broker sends its ERROR before it shuts its side,
        so the write fails only once the ERROR is in; the wait is for brokers that close
        at once, and bounds the pause of a write that failed for another reason)."""
        deadline = time.monotonic() + timeout
        while True:
            err = self.connection_error
            if err is not None and err is not error_before:
                return refusal(self.where, what, err[0], err[1])
            down = conn is None or self._current() is not conn or not conn.is_connected()
            if down or time.monotonic() >= deadline:
                err = self.connection_error  # it may have come just before the end
                return (refusal(self.where, what, err[0], err[1])
                        if err is not None and err is not error_before else None)
            time.sleep(0.01)  # the receiver thread is still reading what the broker sent

    def request(self, fn: Any, *args: Any, timeout: float = 30.0,
                headers: dict[str, str] | None = None, send: bool = False) -> None:
        """Send a frame with a receipt and wait for it, so errors surface here. ``send``:
        a COMMIT, which producer flow control may hold like a SEND (``sendTimeout``)."""
        receipt, event = self.expect()
        conn = self._current()
        fn(*args, headers={**(headers or {}), "receipt": receipt})
        self.wait(receipt, event, conn, self._send_wait() if send else timeout, send=send)

    def expect(self, *, reset_error: bool = True, keep_answer: bool = False
               ) -> tuple[str, threading.Event]:
        """A fresh receipt id and the event its RECEIPT sets. ``reset_error``: an ERROR
        before this is not its answer. ``keep_answer``: the RECEIPT's headers are kept
        for :meth:`answer`."""
        receipt = f"r-{uuid.uuid4().hex[:10]}"
        event = threading.Event()
        if keep_answer:
            self._answers[receipt] = None  # set before the event: read after the wait
        self._receipts[receipt] = event
        if reset_error:
            self.last_error = None
        return receipt, event

    def disconnect(self, conn: Any) -> bool:
        """DISCONNECT ``conn`` with a receipt and wait for it: once it comes, the broker
        has processed everything sent before it. stomp.py's own ``disconnect(receipt=...)``
        waits for its I/O thread with no deadline, so a silent broker held ``close()``
        forever; here the wait is closeTimeout (the caller closes the socket either way),
        and it ends early when the broker closes first (after an ERROR). False: the
        receipt did not come within closeTimeout."""
        receipt, event = self.expect(reset_error=False)
        conn.send_frame("DISCONNECT", {"receipt": receipt})
        self.need_reader()
        deadline = time.monotonic() + self.drain_timeout
        while not event.wait(0.05):
            if not conn.is_connected():  # the broker closed first (after an ERROR)
                self.forget(receipt)
                break
            if time.monotonic() >= deadline:
                log.warning("no receipt for DISCONNECT from %s within closeTimeout=%g s; "
                            "closing the socket anyway", self.where, self.drain_timeout)
                self.forget(receipt)
                return False
        return True

    def wait(
        self, receipt: str, event: threading.Event, conn: Any, timeout: float = 30.0,
        *, what: str = "the request",
        error_before: ErrorFrame | None = None, send: bool = False,
    ) -> None:
        """Wait for ``receipt``; raise the ERROR that answered it (or any unnamed ERROR,
        after which the broker closes), the drop of ``conn``, or the time running out."""
        deadline = time.monotonic() + timeout
        if not event.is_set():
            self.need_reader()
        while not event.wait(0.2):
            err = self.last_error
            if err is not None and err is not error_before and (
                err[0].get("receipt-id") in (None, receipt)
            ):  # an ERROR frame for this or for no receipt: the broker closes after it
                self._receipts.pop(receipt, None)
                self._await_close(conn, ERROR_CLOSE_WAIT)
                raise refusal(self.where, what, err[0], err[1])
            if self._current() is not conn:  # dropped: this receipt can never come
                self._receipts.pop(receipt, None)
                closed = self.connection_error  # the broker's reason, when it gave one
                raise errors.JMSException(
                    f"the connection to the STOMP broker at {self.where} dropped before it "
                    f"confirmed {what}"
                    + (f", after its ERROR: {error_text(*closed)}" if closed else ""),
                    error_code="CONNECTION_INTERRUPTED")
            if time.monotonic() < deadline:
                continue
            self._receipts.pop(receipt, None)
            err = self.last_error
            if send and self.send_timeout_ms > 0:  # held by producer flow control
                raise errors.ResourceAllocationException(
                    f"the STOMP broker at {self.where} did not take {what} within "
                    f"sendTimeout={self.send_timeout_ms} ms: it is applying producer flow "
                    "control (its memory, store or temp space is full), or it stopped "
                    "answering; consume from the destination, raise the broker's limits, "
                    "check the broker, or raise sendTimeout (0 = wait as long as it takes)")
            raise errors.JMSException(
                f"no RECEIPT from the STOMP broker at {self.where} within {timeout:.0f}s "
                f"for {what}" + (f": {error_text(*err)}" if err else "")
            )
        answer = self._refused.pop(receipt, None)
        if answer is not None:
            raise refusal(self.where, what, answer[0], answer[1])

    def _await_close(self, conn: Any, timeout: float) -> None:
        """After an ERROR that answers no other frame, wait (at most ``timeout``) for
        the receiver thread to see the close a broker makes after it: the call that
        raises the ERROR then leaves the connection known down, so the application's
        next call fails with the same reason rather than writing into a closed socket
        (under load the close was seen after that next call). A broker that keeps the
        connection (ActiveMQ after refusing a SEND) costs the wait once."""
        deadline = time.monotonic() + timeout
        while (conn is not None and self._current() is conn and conn.is_connected()
               and time.monotonic() < deadline):
            time.sleep(0.01)  # the receiver thread reads the end of the stream

    # -- the persistent send window -------------------------------------------------------
    def _send_wait(self) -> float:
        """How long a send waits for its RECEIPT: forever (while the connection lives)
        without ``sendTimeout``; with it, that long plus a grace for the broker's answer
        (jmspy broker fails a send held that long with an ERROR naming the limit)."""
        if self.send_timeout_ms <= 0:
            return math.inf
        return self.send_timeout_ms / 1000.0 + SEND_TIMEOUT_GRACE

    def send_checkpointed(
        self, conn_of: Callable[[], Any], write: Callable[[Any, dict[str, str]], None],
        headers: dict[str, str], size: int, what: str,
    ) -> None:
        """A non-persistent send: fire and forget, except that one in
        :data:`CHECKPOINT_SENDS` (or per :data:`CHECKPOINT_BYTES`) carries a receipt and
        the next checkpoint waits for it. That keeps a producer that a broker holds
        (producer flow control) from piling more than two checkpoints' worth of sends
        into it: ``send()`` blocks there, and the connection's ACKs keep being read."""
        if not self.checkpoint_due(size):
            write(conn_of(), headers)
            return
        self.send_confirmed(conn_of, write, headers, what, keep=1)

    def checkpoint_due(self, size: int) -> bool:
        """Count a non-persistent send of ``size`` bytes: True when it is the one that
        carries a receipt (one in :data:`CHECKPOINT_SENDS`, or per
        :data:`CHECKPOINT_BYTES`)."""
        self._unchecked += 1
        self._unchecked_bytes += size
        if self._unchecked < CHECKPOINT_SENDS and self._unchecked_bytes < CHECKPOINT_BYTES:
            return False
        self._unchecked = self._unchecked_bytes = 0
        return True

    def send_confirmed(
        self, conn_of: Callable[[], Any], write: Callable[[Any, dict[str, str]], None],
        headers: dict[str, str], what: str, keep: int | None = None,
    ) -> None:
        """Write a SEND with a receipt (``write(conn, headers)`` on ``conn_of()``), then
        wait until fewer than ``persistentSendWindow`` sends are unconfirmed. An earlier
        send's refusal is raised first, before the connection is asked for: once the
        broker has refused and closed, that refusal is the news, not the closed
        connection."""
        with self._window_lock:
            self._raise_refused_locked()
            if self._in_flight and (self._current() is not self._in_flight[-1].conn
                                    or self.last_error is not self._in_flight[-1].error_before):
                self._settle_locked(0, 5.0)  # an ERROR or a drop since: their outcome first
            conn = conn_of()
            error_before = self.last_error
            receipt, event = self.expect(reset_error=False)
            headers["receipt"] = receipt
            try:
                write(conn, headers)
            except Exception:
                self._receipts.pop(receipt, None)
                if self._in_flight:  # the socket died: an earlier refusal explains it
                    self._settle_locked(0, 5.0)
                raise
            self._in_flight.append(_InFlight(receipt, event, conn, what, error_before))
            self._settle_locked(self._send_window - 1 if keep is None else keep)

    def settle_sends(self, timeout: float | None = None) -> None:
        """Wait for every unconfirmed persistent send (before COMMIT and close): raises
        the first refusal or loss among them."""
        with self._window_lock:
            self._raise_refused_locked()
            self._settle_locked(0, timeout)

    def _settle_locked(self, keep: int, timeout: float | None = None) -> None:
        while len(self._in_flight) > keep:
            sent = self._in_flight[0]
            try:
                self.wait(
                    sent.receipt, sent.event, sent.conn,
                    self._send_wait() if timeout is None else timeout,
                    what=sent.what, error_before=sent.error_before, send=True)
            except errors.JMSException as exc:
                raise self._fail_window(exc) from None
            self._in_flight.popleft()

    def _raise_refused_locked(self) -> None:
        """A send later in the window refused while an earlier one is still unanswered
        (a broker may answer out of order): raise it now."""
        for sent in self._in_flight:
            answer = self._refused.pop(sent.receipt, None)
            if answer is not None:
                raise self._fail_window(refusal(self.where, sent.what, *answer))

    def _fail_window(self, exc: errors.JMSException) -> errors.JMSException:
        """Forget the whole window after a failure (the brokers close the connection
        after an ERROR; a drop loses every receipt) and say what else is unconfirmed."""
        others = len(self._in_flight) - 1
        for sent in self._in_flight:
            self._receipts.pop(sent.receipt, None)
            self._refused.pop(sent.receipt, None)
        self._in_flight.clear()
        if others > 0:
            exc.args = (f"{exc.args[0]} ({others} later persistent send(s) of this "
                        "connection were not confirmed either)",)
        return exc
