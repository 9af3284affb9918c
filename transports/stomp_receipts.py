"""RECEIPTs of ``stomp://``: a frame sent with a ``receipt`` header, and the wait for the
broker's answer, so that what the broker refuses (an ERROR frame) or never confirms (the
connection dropped, or the time ran out) fails the call that sent it.

A mixin of :class:`~jmspy.transports.stomp.StompTransport`, apart from :mod:`.stomp` so
the steady-state path reads on its own; SUBSCRIBE (``create_consumer``), COMMIT, the
management requests of :mod:`.stomp_admin` and persistent SENDs use it.

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

import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jmspy import errors

from .broker_errors import ERROR_CODE_HEADER, class_for_code

__all__ = ["StompReceipts", "refusal"]

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
    message = headers.get("message", "")
    # jmspy's broker repeats the message header at the start of the body
    detail = text.strip() if text.startswith(message) else f"{message} {text}".strip()
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
    error_before: tuple[dict[str, str], str] | None


class StompReceipts:
    """Mixin of :class:`~jmspy.transports.stomp.StompTransport`. The attributes below are
    the transport's; declared for the type checker only."""

    _conn: Any
    _receipts: dict[str, threading.Event]
    _error: tuple[dict[str, str], str] | None
    #: receipt id -> the ERROR frame that answered it (set by the receiver thread)
    _refused: dict[str, tuple[dict[str, str], str]]
    _send_window: int
    _in_flight: deque[_InFlight]
    _window_lock: threading.Lock
    _drain_timeout: float

    if TYPE_CHECKING:
        @property
        def where(self) -> str: ...

    def _init_receipts(self, properties: Mapping[str, Any]) -> None:
        self._receipts = {}
        self._refused = {}
        self._send_window = int(properties.get("persistentSendWindow", 1))
        self._in_flight = deque()
        self._window_lock = threading.Lock()
        self._drain_timeout = float(properties.get("closeTimeout", 30)) or 30.0

    def _on_receipt(self, receipt_id: str) -> None:
        event = self._receipts.pop(receipt_id, None)
        if event is not None:
            event.set()

    def _on_refusal(self, headers: dict[str, str], text: str) -> None:
        """An ERROR frame (receiver thread): when it names a receipt we wait for, that
        call fails with it rather than with whatever else is waiting."""
        receipt = headers.get("receipt-id")
        event = self._receipts.pop(receipt, None) if receipt else None
        if event is not None:
            assert receipt is not None
            self._refused[receipt] = (headers, text)
            event.set()

    def _request(self, fn: Any, *args: Any, timeout: float = 30.0) -> None:
        """Send a frame with a receipt and wait for it, so errors surface here."""
        receipt, event = self._expect_receipt()
        conn = self._conn
        fn(*args, headers={"receipt": receipt})
        self._await_receipt(receipt, event, conn, timeout)

    def _expect_receipt(self, *, reset_error: bool = True) -> tuple[str, threading.Event]:
        receipt = f"r-{uuid.uuid4().hex[:10]}"
        event = threading.Event()
        self._receipts[receipt] = event
        if reset_error:
            self._error = None
        return receipt, event

    def _await_receipt(
        self, receipt: str, event: threading.Event, conn: Any, timeout: float = 30.0,
        *, what: str = "the request",
        error_before: tuple[dict[str, str], str] | None = None,
    ) -> None:
        deadline = time.monotonic() + timeout
        while not event.wait(0.2):
            err = self._error
            if err is not None and err is not error_before and (
                err[0].get("receipt-id") in (None, receipt)
            ):  # an ERROR frame for this or for no receipt: the broker closes after it
                self._receipts.pop(receipt, None)
                raise refusal(self.where, what, err[0], err[1])
            if self._conn is not conn:  # dropped: this receipt can never come
                self._receipts.pop(receipt, None)
                raise errors.JMSException(
                    f"the connection to the STOMP broker at {self.where} dropped before it "
                    f"confirmed {what}", error_code="CONNECTION_INTERRUPTED")
            if time.monotonic() < deadline:
                continue
            self._receipts.pop(receipt, None)
            err = self._error
            raise errors.JMSException(
                f"no RECEIPT from the STOMP broker at {self.where} within {timeout:.0f}s "
                f"for {what}" + (f": {err[0].get('message', '')} {err[1]}" if err else "")
            )
        answer = self._refused.pop(receipt, None)
        if answer is not None:
            raise refusal(self.where, what, answer[0], answer[1])

    # -- the persistent send window -------------------------------------------------------
    def _send_confirmed(
        self, conn_of: Callable[[], Any], write: Callable[[Any, dict[str, str]], None],
        headers: dict[str, str], what: str,
    ) -> None:
        """Write a SEND with a receipt (``write(conn, headers)`` on ``conn_of()``), then
        wait until fewer than ``persistentSendWindow`` sends are unconfirmed. An earlier
        send's refusal is raised first, before the connection is asked for: once the
        broker has refused and closed, that refusal is the news, not the closed
        connection."""
        with self._window_lock:
            self._raise_refused_locked()
            if self._in_flight and (self._conn is not self._in_flight[-1].conn
                                    or self._error is not self._in_flight[-1].error_before):
                self._settle_locked(0, 5.0)  # an ERROR or a drop since: their outcome first
            conn = conn_of()
            error_before = self._error
            receipt, event = self._expect_receipt(reset_error=False)
            headers["receipt"] = receipt
            try:
                write(conn, headers)
            except Exception:
                self._receipts.pop(receipt, None)
                if self._in_flight:  # the socket died: an earlier refusal explains it
                    self._settle_locked(0, 5.0)
                raise
            self._in_flight.append(_InFlight(receipt, event, conn, what, error_before))
            self._settle_locked(self._send_window - 1)

    def _settle_sends(self, timeout: float | None = None) -> None:
        """Wait for every unconfirmed persistent send (before COMMIT and close): raises
        the first refusal or loss among them."""
        with self._window_lock:
            self._raise_refused_locked()
            self._settle_locked(0, timeout)

    def _settle_locked(self, keep: int, timeout: float | None = None) -> None:
        while len(self._in_flight) > keep:
            sent = self._in_flight[0]
            try:
                self._await_receipt(
                    sent.receipt, sent.event, sent.conn,
                    30.0 if timeout is None else timeout,
                    what=sent.what, error_before=sent.error_before)
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
