"""A STOMP session's transactions: BEGIN, COMMIT and ABORT, and the ACKs each one holds.

STOMP names a transaction by the client's ``transaction`` header; the core connection
keeps what it staged. What the session must keep itself is, per open transaction, the
acknowledgements made in it: their subscriptions' windows refill when the transaction
ends (committed or aborted: either way the client consumed them, and an abort
redelivers into a refilled window), not when the ACK arrives. A
:class:`~.protocol.StompSession` composes one :class:`SessionTransactions` and hands it
its core connection per frame; these are per-connection frames, off the path of every
message.
"""

from __future__ import annotations

from ...core import ServerConnection
from .held import HeldSends, send_timeout
from .refusals import ProtocolError
from .subscription import Subscription

__all__ = ["SessionTransactions"]


class SessionTransactions:
    """The open transactions of one STOMP session and the ACKs made in each."""

    __slots__ = ("_consumed",)

    def __init__(self) -> None:
        #: open transaction -> (subscription, messages acknowledged in it), in order
        self._consumed: dict[str, list[tuple[Subscription, int]]] = {}

    def named(self, headers: dict[str, str]) -> str | None:
        """The open transaction a frame's ``transaction`` header names (None: none);
        a ProtocolError for one that was not begun or has ended."""
        tx = headers.get("transaction")
        if tx is not None and tx not in self._consumed:
            raise ProtocolError("unknown transaction", f"transaction {tx!r} was not begun "
                                "(or is already committed/aborted); send BEGIN first")
        return tx

    def acked(self, tx: str, sub: Subscription, count: int) -> None:
        """``count`` messages of ``sub`` were acknowledged in open transaction ``tx``."""
        self._consumed[tx].append((sub, count))

    def begin(self, core: ServerConnection, headers: dict[str, str]) -> None:
        tx = headers.get("transaction")
        if not tx:
            raise ProtocolError("missing transaction header", "BEGIN needs a transaction id")
        core.begin(tx)
        self._consumed[tx] = []

    def end(self, core: ServerConnection, command: str, headers: dict[str, str],
            commit: bool, held: HeldSends) -> list[tuple[Subscription, int]]:
        """COMMIT (``commit``) or ABORT the transaction ``headers`` name; a COMMIT that
        producer flow control holds is parked in ``held``. Returns what was acknowledged
        in it: the caller refills those windows."""
        tx = self.named(headers)
        if tx is None:
            raise ProtocolError("missing transaction header", f"{command} needs the "
                                "transaction id given to BEGIN")
        consumed = self._consumed.pop(tx)
        if commit:
            ticket = HeldSends.ticket(headers, 0)
            if not core.commit(tx, ticket=ticket, timeout_ms=send_timeout(headers)):
                held.parked(ticket)
        else:
            core.rollback(tx)
        return consumed
