"""Transactions on ``stomp://``: BEGIN, COMMIT (confirmed by a RECEIPT), ABORT, and the
connection each open transaction began on.

A broker forgets a connection's transactions when it ends, so after a reconnect the old
ids name nothing (RabbitMQ answers "Bad transaction", ActiveMQ "Invalid transaction id"):
a transaction remembers its stomp.py connection, and committing (or acknowledging in)
one of a connection that dropped fails with ``TRANSACTION_LOST`` instead.
"""

from __future__ import annotations

from typing import Any, Protocol

from jmspy import errors

from .receipts import Receipts

__all__ = ["StompTransactions", "TransactionsHost"]


class TransactionsHost(Protocol):
    """What :class:`StompTransactions` asks of the transport."""

    @property
    def where(self) -> str: ...

    @property
    def live(self) -> Any:
        """The stomp.py connection in use, or None while down or closed."""

    @property
    def lost(self) -> str | None:
        """Why the connection is gone for good (None: it is not)."""

    @property
    def send_timeout_header(self) -> dict[str, str]: ...

    def connection(self, wait: bool = True) -> Any: ...

    def write_failed(self, conn: Any, exc: Exception, doing: str) -> errors.JMSException:
        """The connection is lost: the JMSException that says so."""


class StompTransactions:
    """The open transactions of one transport, each with the connection it began on."""

    __slots__ = ("_host", "_receipts", "_tx_on")

    def __init__(self, host: TransactionsHost, receipts: Receipts) -> None:
        self._host = host
        self._receipts = receipts
        # The stomp.py connection each open transaction began on.
        self._tx_on: dict[str, Any] = {}

    def began_on(self, tx: str, conn: Any) -> bool:
        """``tx`` began on ``conn`` (a send in it goes out; else its commit fails)."""
        return self._tx_on.get(tx) is conn

    def open_on(self, tx: str, conn: Any) -> bool:
        """Whether a send in ``tx`` goes out on ``conn``: True when ``tx`` is open there;
        False when it began on a connection that has since dropped (the broker rolled it
        back; its commit fails with ``TRANSACTION_LOST``).

        A transaction whose BEGIN never went out is begun now. That is the session's
        next transaction after a commit the broker refused with an ERROR and closed: its
        BEGIN met the closing socket before the receiver thread reported the close, and a
        send in it that returned quietly ("its commit will fail") would say nothing of
        the broker's reason. Begun here, the send meets what the connection is now: the
        close and the ERROR that explains it, or the connection made again."""
        began = self._tx_on.get(tx)
        if began is None:
            self._begin_on(tx, conn)
            return True
        return began is conn

    def begin(self, tx: str) -> None:
        self._begin_on(tx, self._host.connection())

    def _begin_on(self, tx: str, conn: Any) -> None:
        try:
            conn.begin(tx)
        except Exception as exc:
            raise self._host.write_failed(conn, exc, "beginning a transaction") from exc
        self._tx_on[tx] = conn

    def check(self, tx: str, conn: Any) -> None:
        """Refuse to commit (or ack in) a transaction of a connection that dropped: the
        broker rolled it back when that connection ended. One whose BEGIN never went out
        is begun first (see :meth:`open_on`)."""
        if tx not in self._tx_on:
            self._begin_on(tx, conn)
        if self._tx_on.get(tx) is not conn:
            self._tx_on.pop(tx, None)
            raise errors.JMSException(
                f"transaction {tx} began on a connection to the STOMP broker that has "
                f"since dropped (now on {self._host.where}); the broker rolled it back",
                error_code="TRANSACTION_LOST")

    def commit(self, tx: str) -> None:
        host = self._host
        self._receipts.settle_sends()  # a windowed send's refusal is raised here first
        conn = host.connection()
        self.check(tx, conn)
        try:
            self._receipts.request(conn.commit, tx, send=True,
                                   headers=host.send_timeout_header)
        except errors.JMSException:
            raise
        except Exception as exc:
            raise host.write_failed(conn, exc, "committing") from exc
        self._tx_on.pop(tx, None)

    def rollback(self, tx: str) -> None:
        host = self._host
        began_on = self._tx_on.pop(tx, None)
        live = host.live
        if live is None and host.lost:  # gone for good: so is the transaction
            return  # (a commit failing on a refused send rolls back after the close)
        if began_on is None or began_on is not live:
            return  # its connection dropped: the broker rolled it back then
        try:
            host.connection().abort(tx)
        except Exception:
            # The socket closed under the ABORT (the broker closes right after the ERROR
            # that failed a commit, before stomp.py reports the drop: an OSError, or
            # stomp.py's NotConnectedException once its reader has closed the socket): a
            # STOMP broker aborts the transactions of a connection that ends, so nothing
            # is left open.
            return
