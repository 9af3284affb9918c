"""RECEIPTs of ``stomp://``: a frame sent with a ``receipt`` header, and the wait for the
broker's answer, so that what the broker refuses (an ERROR frame) or never confirms (the
connection dropped, or the time ran out) fails the call that sent it.

A mixin of :class:`~jmspy.transports.stomp.StompTransport`, apart from :mod:`.stomp` so
the steady-state path reads on its own; SUBSCRIBE (``create_consumer``), COMMIT and the
management requests of :mod:`.stomp_admin` use it.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from jmspy import errors

__all__ = ["StompReceipts"]


class StompReceipts:
    """Mixin of :class:`~jmspy.transports.stomp.StompTransport`. The attributes below are
    the transport's; declared for the type checker only."""

    _conn: Any
    _receipts: dict[str, threading.Event]
    _error: tuple[dict[str, str], str] | None

    if TYPE_CHECKING:
        @property
        def where(self) -> str: ...

    def _on_receipt(self, receipt_id: str) -> None:
        event = self._receipts.pop(receipt_id, None)
        if event is not None:
            event.set()

    def _request(self, fn: Any, *args: Any, timeout: float = 30.0) -> None:
        """Send a frame with a receipt and wait for it, so errors surface here."""
        receipt, event = self._expect_receipt()
        conn = self._conn
        fn(*args, headers={"receipt": receipt})
        self._await_receipt(receipt, event, conn, timeout)

    def _expect_receipt(self) -> tuple[str, threading.Event]:
        receipt = f"r-{uuid.uuid4().hex[:10]}"
        event = threading.Event()
        self._receipts[receipt] = event
        self._error = None
        return receipt, event

    def _await_receipt(
        self, receipt: str, event: threading.Event, conn: Any, timeout: float = 30.0
    ) -> None:
        deadline = time.monotonic() + timeout
        while not event.wait(0.2):
            err = self._error
            if err is not None:  # an ERROR frame: the broker closes the connection after it
                self._receipts.pop(receipt, None)
                raise errors.JMSException(
                    f"the STOMP broker at {self.where} refused the request: "
                    f"{err[0].get('message', '')} {err[1]}".strip())
            if self._conn is not conn:  # dropped: this receipt can never come
                self._receipts.pop(receipt, None)
                raise errors.JMSException(
                    f"the connection to the STOMP broker at {self.where} dropped before it "
                    "confirmed the request", error_code="CONNECTION_INTERRUPTED")
            if time.monotonic() < deadline:
                continue
            self._receipts.pop(receipt, None)
            err = self._error
            raise errors.JMSException(
                f"no RECEIPT from the STOMP broker at {self.where} within {timeout:.0f}s"
                + (f": {err[0].get('message', '')} {err[1]}" if err else "")
            )
