"""``stomp://``'s asynchronous sends (``Transport.send_async``): the SEND is written on the
caller's thread and its outcome is reported by callback, in send order, when the broker
answers, with no thread waiting for the RECEIPT.

Why: without it the core sends asynchronously on its notifier thread, which writes the
frame and then waits for the RECEIPT before the next send: a persistent send that
``jmspy.aio`` awaits crossed three threads (the loop, the notifier, stomp.py's receiver)
and paid a wake-up at each. Here the loop writes, and whichever thread reads the RECEIPT
(the receiver, or the loop itself when it holds the reading turn) reports it.

What each send waits for, as in the blocking ``send()`` (:mod:`.receipts`):

* a persistent send outside a transaction: its RECEIPT, or the ERROR that names it (the
  broker refused it: the JMS class :func:`.receipts.refusal` picks), or the drop of its
  connection (CONNECTION_INTERRUPTED, with the broker's last ERROR when it gave one);
* a non-persistent send: nothing, except that one in ``CHECKPOINT_SENDS`` carries a
  receipt (:meth:`.receipts.Receipts.checkpoint_due`); the sends after it are reported
  only once it is answered, so a producer that awaits its sends stops while a broker
  applies producer flow control, without a thread (or the event loop) blocked;
* a transacted send: nothing (COMMIT confirms, as for the blocking send).

Outcomes are reported in send order: a send answered early waits for the ones before it.
While the connection is down (a reconnect in progress) sends are *parked* in order and
written once it is back (before any later send), or failed with the reason when it is
lost for good or closed: a send never waits on the caller's thread for a reconnect.

What bounds it: at most :data:`CAP` sends may be unreported; the one past it waits on
the caller's thread for room, except on a thread running an event loop (a ``gather`` of
thousands of awaited sends): there it is parked, as across a reconnect, and written by
the thread that reports the send before it makes room.
``sendTimeout`` is the broker's to apply (jmspy broker answers a send it held that long
with an ERROR); a send another broker holds for ever is reported when the connection
drops or closes.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jmspy import errors
from jmspy.logs import transport_logger
from jmspy.transport import on_event_loop

__all__ = ["CAP", "AsyncSends", "Done", "write_nothing"]

log = transport_logger("stomp")

#: Unreported asynchronous sends a connection holds before the next one waits for room.
CAP = 1000

#: The outcome callback: ``done(None)`` confirmed, ``done(exc)`` failed.
Done = Callable[[Exception | None], None]


@dataclass(eq=False, slots=True)
class _Send:
    """One asynchronous send between its write and its report."""

    conn: Any
    what: str
    done: Done
    receipt: str | None  # None: nothing to wait for once written
    settled: bool = False
    error: Exception | None = None


@dataclass(eq=False, slots=True)
class _Parked:
    """A send made while the connection was down: written when it is back."""

    write: Callable[[Any], tuple[str | None, Callable[[dict[str, str]], None]]]
    what: str
    done: Done


class AsyncSends:
    """The asynchronous sends of one ``stomp://`` transport: the ledger of written sends
    in send order, the receipts they wait for, and the sends parked across a reconnect.

    ``live()`` is the connection to write on (None while down); ``where()`` names the
    broker in errors."""

    def __init__(self, live: Callable[[], Any], where: Callable[[], str]) -> None:
        self._live = live
        self._where = where
        self._cond = threading.Condition(threading.Lock())
        self._ledger: deque[_Send] = deque()  # written, not reported, in send order
        self._waiting: dict[str, _Send] = {}  # receipt -> the send it confirms
        self._parked: deque[_Parked] = deque()
        self._reporting = False
        self._flushing = False  # parked sends are being written: later ones park too
        self._ids = itertools.count(1)

    @property
    def unreported(self) -> int:
        """Sends written or parked whose outcome has not been reported yet."""
        return len(self._ledger) + len(self._parked)

    def receipt_id(self) -> str:
        """A receipt id for one send (unique on the transport, whatever its connection)."""
        return f"as-{next(self._ids)}"

    # -- sending -------------------------------------------------------------------------
    def send(self, prepare: Callable[[Any], tuple[str | None, Callable[[dict[str, str]], None]]],
             what: str, done: Done) -> None:
        """``prepare(conn)`` returns the receipt this send waits for (None: none) and the
        function that writes it with extra headers; it runs now on the live connection,
        or later when the connection is back (the send is parked meanwhile)."""
        with self._cond:
            while len(self._ledger) + len(self._parked) >= CAP:
                if on_event_loop():  # never wait on a loop: written when room comes
                    self._parked.append(_Parked(prepare, what, done))
                    return
                self._cond.wait()
            conn = self._live()
            if conn is None or self._parked or self._flushing:  # down, or parked before
                self._parked.append(_Parked(prepare, what, done))
                return
            entry = self._enter(conn, prepare, what, done)
        if entry is not None:
            self._write(entry)

    def _enter(self, conn: Any, prepare: Callable[[Any], tuple[str | None, Any]],
               what: str, done: Done) -> tuple[_Send, Callable[[dict[str, str]], None]] | None:
        """(Under the lock.) Put a send in the ledger before it is written (its answer
        may come before the write returns)."""
        try:
            receipt, write = prepare(conn)
        except Exception as exc:  # what the transport refuses before writing
            entry = _Send(conn, what, done, None, True, _as_jms(exc))
            self._ledger.append(entry)
            return None
        entry = _Send(conn, what, done, receipt)
        self._ledger.append(entry)
        if receipt is not None:
            self._waiting[receipt] = entry
        return entry, write

    def _write(self, entry: tuple[_Send, Callable[[dict[str, str]], None]]) -> None:
        send, write = entry
        try:
            write({} if send.receipt is None else {"receipt": send.receipt})
        except Exception as exc:  # the socket dropped under the write
            self._settle(send, exc)
        else:
            if send.receipt is None:
                self._settle(send, None)
        self._report()

    def flush_parked(self) -> None:
        """(The connection is back, or reports made room.) Write the parked sends, in
        order, before any later send (those park meanwhile, and are written here too);
        stops at :data:`CAP` unreported (the reports that make room go on) or if the
        connection drops again (the rest stay parked)."""
        with self._cond:
            if self._flushing:
                return
            self._flushing = True
        try:
            while True:
                with self._cond:
                    conn = self._live()
                    if conn is None or not self._parked or len(self._ledger) >= CAP:
                        self._flushing = False
                        return
                    parked = self._parked.popleft()
                    entry = self._enter(conn, parked.write, parked.what, parked.done)
                    self._cond.notify_all()
                if entry is not None:
                    self._write(entry)
                else:
                    self._report()
        except BaseException:
            with self._cond:
                self._flushing = False
            raise

    # -- answers -------------------------------------------------------------------------
    def answered(self, receipt: str) -> bool:
        """A RECEIPT (the reading thread): True if it confirmed one of these sends."""
        send = self._waiting.get(receipt)
        if send is None:
            return False
        self._settle(send, None)
        self._report()
        return True

    def refused(self, receipt: str | None, error: Callable[[str], errors.JMSException]
                ) -> bool:
        """An ERROR naming ``receipt``: True if it refused one of these sends, which
        fails with ``error(what)``."""
        send = self._waiting.get(receipt) if receipt else None
        if send is None:
            return False
        self._settle(send, error(send.what))
        self._report()
        return True

    def connection_dropped(self, broker_error: str | None) -> None:
        """The connection dropped: the sends it did not answer can never be (their
        messages may or may not have reached the broker); parked sends wait on."""
        with self._cond:
            waiting = list(self._waiting.values())
        for send in waiting:
            self._settle(send, errors.JMSException(
                f"the connection to the STOMP broker at {self._where()} dropped before it "
                f"confirmed {send.what}"
                + (f", after its ERROR: {broker_error}" if broker_error else ""),
                error_code="CONNECTION_INTERRUPTED"))
        self._report()

    def fail_all(self, error: Callable[[str], errors.JMSException]) -> None:
        """Closed or lost for good: every send not yet reported fails (parked ones too)."""
        with self._cond:
            waiting = list(self._waiting.values())
            parked = list(self._parked)
            self._parked.clear()
            for p in parked:
                self._ledger.append(_Send(None, p.what, p.done, None, True, error(p.what)))
            self._cond.notify_all()
        for send in waiting:
            self._settle(send, error(send.what))
        self._report()

    def wait_settled(self, timeout: float) -> bool:
        """Wait (up to ``timeout`` seconds) until every written send is reported; parked
        sends are not waited for. False: some are still unanswered."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._ledger, timeout)

    # -- reporting -----------------------------------------------------------------------
    def _settle(self, send: _Send, error: Exception | None) -> None:
        with self._cond:
            if send.settled:
                return
            send.settled = True
            send.error = error
            if send.receipt is not None:
                self._waiting.pop(send.receipt, None)

    def _report(self) -> None:
        """Report the settled sends at the front of the ledger, in order. One thread
        reports at a time; a thread that finds another reporting leaves its sends to it,
        so two threads never report out of order."""
        with self._cond:
            if self._reporting:
                return
            self._reporting = True
        try:
            while True:
                with self._cond:
                    ready: list[_Send] = []
                    ledger = self._ledger
                    while ledger and ledger[0].settled:
                        ready.append(ledger.popleft())
                    if not ready:
                        self._reporting = False
                        room = (bool(self._parked) and not self._flushing
                                and len(self._ledger) < CAP)
                        break
                    self._cond.notify_all()
                for send in ready:
                    try:
                        send.done(send.error)
                    except Exception:  # a callback's fault must not stop the others
                        log.exception("the outcome callback of %s raised", send.what)
        except BaseException:
            with self._cond:
                self._reporting = False
            raise
        if room and self._live() is not None:
            self.flush_parked()  # sends parked past the cap (or a reconnect's, late)


def write_nothing(extra: dict[str, str]) -> None:
    """The write of a send in a transaction begun on a connection that dropped since: it
    is not sent, and the transaction's COMMIT fails (as for the blocking send)."""


def _as_jms(exc: Exception) -> Exception:
    return exc if isinstance(exc, errors.JMSException) else errors.JMSException(
        f"{type(exc).__name__}: {exc}")
