"""``Transactions``: the local transactions of one connection, and all they hold.

A transaction stages sends and acknowledgements; none of it is visible until the commit
routes the sends and acknowledges the deliveries as one unit, and a rollback drops the
sends and gives the deliveries back, redelivered. While an acknowledgement is staged its
delivery belongs to the transaction: the connection neither settles it outside the
transaction nor cancels it when its consumer closes (Artemis keeps the transactional acks
of a closed consumer the same way), so :attr:`Transactions.staged` is what the
connection's delivery checks read.

A commit is admitted by producer flow control like a send (:mod:`.producer_flow`): when
its sends need space it is parked, and the broker later calls
``ServerConnection.commit_admitted``, which lands in :meth:`Transactions.commit_admitted`.
The connection (:mod:`.connection`) checks that it is open before each call here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..store.store_faults import StoreWriteFailed
from .api import ServerMessage
from .errors import BrokerError, TransactionError
from .producer_flow import FlowConnection

if TYPE_CHECKING:
    from ..store.store import Store
    from .postoffice import PostOffice
    from .producer_flow import ProducerFlow
    from .records import QueueRef, ServerConsumer

__all__ = ["Transactions"]



class TxBroker(Protocol):
    """What transactions use of the broker (:class:`~.broker.Broker`): a Protocol, so
    that this module sits below the broker and its connections."""

    @property
    def flow(self) -> ProducerFlow: ...
    @property
    def post_office(self) -> PostOffice: ...
    @property
    def store(self) -> Store | None: ...


class TxConnection(FlowConnection, Protocol):
    """The connection the transactions belong to (:class:`~.connection.ServerConnection`)."""

    @property
    def client_id(self) -> str | None: ...

@dataclass(slots=True)
class _Transaction:
    sends: list[ServerMessage] = field(default_factory=list)
    acks: list[int] = field(default_factory=list)


class Transactions:
    """The open transactions of one connection (see the module docstring).

    ``owners`` is the connection's delivery tag -> consumer index (its delivery channel's);
    ``cancel`` gives deliveries back to their queues in their original order and returns
    the queues touched: the connection's own way of cancelling, shared, not copied."""

    __slots__ = ("_broker", "_cancel", "_conn", "_owners", "_staged", "_txs", "staged")

    def __init__(
        self,
        conn: TxConnection,
        broker: TxBroker,
        owners: dict[int, ServerConsumer],
        cancel: Callable[[list[int], bool], set[QueueRef]],
    ) -> None:
        self._conn = conn
        self._broker = broker
        self._owners = owners
        self._cancel = cancel
        self._txs: dict[str, _Transaction] = {}
        self._staged: dict[int, str] = {}
        #: delivery tag -> the transaction that staged its ack: a read-only view for the
        #: connection's tag checks (written here only)
        self.staged: Mapping[int, str] = self._staged

    def _get(self, tx: str) -> _Transaction:
        t = self._txs.get(tx)
        if t is None:
            raise TransactionError(
                f"unknown transaction {tx!r} on connection {self._conn.connection_id}: call "
                f"begin({tx!r}) first (it may already be committed or rolled back)"
            )
        return t

    def begin(self, tx: str) -> None:
        if tx in self._txs:
            raise TransactionError(
                f"transaction {tx!r} is already open on connection "
                f"{self._conn.connection_id}; commit or roll it back, or use a new "
                "transaction id"
            )
        self._txs[tx] = _Transaction()

    def require(self, tx: str) -> None:
        """Raise :class:`TransactionError` unless ``tx`` is open (checked before anything
        else about a transactional call, so an unknown transaction is what is reported)."""
        self._get(tx)

    def stage_send(self, tx: str, message: ServerMessage) -> None:
        """Keep ``message`` for the commit of ``tx``; refused now if it could not be
        routed (staging neither routes nor auto-creates)."""
        t = self._get(tx)
        self._broker.post_office.check_routable(message)
        t.sends.append(message)

    def stage_acks(self, tx: str, tags: list[int]) -> None:
        """Acknowledge ``tags`` (checked by the connection) when ``tx`` commits."""
        t = self._get(tx)
        staged = self._staged
        for tag in tags:
            staged[tag] = tx
            t.acks.append(tag)

    def sends(self, tx: str | None) -> list[ServerMessage]:
        """The messages transaction ``tx`` would route at commit ([] if unknown)."""
        t = self._txs.get(tx) if tx is not None else None
        return [] if t is None else t.sends

    def commit(self, tx: str, ticket: object, timeout_ms: int) -> bool:
        """Commit ``tx``, or park it with producer flow control while its sends wait for
        space (False). Refused outright (``send-fail-if-no-space``), it is rolled back:
        nothing is half-stored."""
        t = self._get(tx)
        conn = self._conn
        flow = self._broker.flow
        full = flow.must_wait_commit(conn, t.sends) if t.sends else None
        if full is not None:
            try:
                flow.park(conn, ticket, None, tx, full, timeout_ms)
            except BrokerError:
                self.rollback(tx)
                raise
            return False
        self.commit_admitted(tx)
        return True

    def commit_admitted(self, tx: str) -> None:
        """Commit ``tx`` now (its space is there, or it needs none). A send that can no
        longer be routed rolls the whole transaction back."""
        t = self._get(tx)
        del self._txs[tx]
        broker = self._broker
        post = broker.post_office
        for m in t.sends:
            try:
                post.check_routable(m)
            except BrokerError as exc:
                self._undo(t)
                raise TransactionError(f"transaction {tx!r} was rolled back: {exc}") from exc
        store = broker.store
        if store is not None and any(m.persistent for m in t.sends):
            full = store.refusal()  # asked first: a store failing half-way through the
            if full is not None:  # routing would leave some of the sends delivered
                self._undo(t)
                raise StoreWriteFailed(f"transaction {tx!r} was rolled back: {full}")
        owners = self._owners
        staged = self._staged
        touched: set[QueueRef] = set()
        client_id = self._conn.client_id
        with post.batch():
            for tag in t.acks:
                del staged[tag]
                c = owners.pop(tag)
                c.queue.acknowledge(c, tag)
                touched.add(c.queue)
            for m in t.sends:
                post.route(m, client_id)
        for q in touched:
            q.dispatch()
        flow = broker.flow
        if flow.parked:  # acknowledged messages left RAM: parked sends may go on
            flow.resume()

    def rollback(self, tx: str) -> None:
        """Drop ``tx``: its sends are forgotten, a parked commit of it is withdrawn, its
        deliveries go back to their queues, redelivered."""
        t = self._get(tx)
        self._broker.flow.drop_commit(self._conn, tx)
        del self._txs[tx]
        self._undo(t)

    def _undo(self, t: _Transaction) -> None:
        staged = self._staged
        for tag in t.acks:
            del staged[tag]
        for q in self._cancel(t.acks, True):
            q.dispatch()

    def clear(self) -> None:
        """The connection closed: every transaction ends unfinished (its deliveries are
        cancelled with the connection's others)."""
        self._txs.clear()
        self._staged.clear()
