"""``ServerConnection``: one client connection inside the broker (``CoreConnection``).

It owns what is per-connection in JMS: consumers, delivery tags, temporary queues and
non-durable subscriptions — and so everything a connection close must undo. Its
transactions are a :class:`~.transactions.Transactions` it composes; queue-level decisions
(order, credit, dead-lettering) are delegated to :mod:`.queue`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from jmspy.broker_ref.core import run_twins

from .api import (
    TEMP_PREFIX,
    ConsumerInfo,
    DestinationKind,
    DestinationStats,
    ServerMessage,
    SessionCallback,
)
from .consumer import ConnectionRecord
from .errors import AccessDenied, IllegalBrokerState, InvalidSubscription
from .flow_gate import ConnectionGate
from .leases import ConnectionLeases
from .queue import DeliveryChannel, ServerConsumer, compile_filter, effective_flow_limit
from .records import QueueRef
from .settings import is_wildcard
from .subscribing import attach_subscription
from .temp_queues import TemporaryQueues
from .topic import Subscription
from .transactions import Transactions

if TYPE_CHECKING:
    from .connection_broker import ConnectionBroker
    from .security import Action, Principal

__all__ = ["ServerConnection"]

#: Acknowledges a run of tags and routes the common send (compiled twin; queue_run.py
#: beside this module documents both), bound once: the broker core's package imports
#: nothing, so the twin is whole whichever module is imported first.
_tags_known_once = run_twins.queue_run.tags_known_once
_route_fast = run_twins.queue_run.route_fast
_acknowledge_tags = run_twins.queue_run.acknowledge_tags


def _norm_selector(selector: str | None) -> str | None:
    return selector if selector is not None and selector.strip() else None


class ServerConnection(ConnectionRecord):
    """Implements :class:`~.api.CoreConnection`. Obtain one from ``Broker.connect()``."""

    # _broker, _flow, _id, _queues and closed are the ConnectionRecord's (.records)
    _broker: ConnectionBroker[ServerConnection]  # the record types it by what the common send reads
    __slots__ = (
        "_channel", "_consumer_subs", "_consumers", "_gate", "_temps", "_transactions",
        "callback", "client_id", "leases", "principal", "user",
    )  # fmt: skip

    def __init__(
        self,
        broker: ConnectionBroker[ServerConnection],
        connection_id: int,
        callback: SessionCallback,
        client_id: str | None,
        user: str | None,
        *,
        principal: Principal | None = None,
        flow_limit: int | None = None,
    ) -> None:
        self._broker = broker
        self._flow = broker.flow
        self._queues = broker.queues
        #: who authenticated (None without a security policy); see .security
        self.principal = principal
        self._id = connection_id
        self.callback = callback
        self.client_id = client_id
        self.user = user
        self.closed = False
        self._channel = DeliveryChannel(connection_id, callback)
        self._gate = ConnectionGate(self._channel, flow_limit)
        self._consumers: dict[int, ServerConsumer] = {}
        self._consumer_subs: dict[int, Subscription] = {}
        self._transactions = Transactions(self, broker, self._channel.tags, self._cancel_tags)
        self._temps = TemporaryQueues(broker.post_office, connection_id)
        #: reading leases (.leases): lend its deliveries, settle or release any token
        self.leases = ConnectionLeases(broker.leases, self._channel, self._check_open,
                                       self._check_tags, self._authorize, broker.now,
                                       self._space_may_be_free)

    @property
    def connection_id(self) -> int:
        return self._id

    def consumer_ids(self) -> list[int]:
        return list(self._consumers)

    def consumers(self) -> list[ServerConsumer]:
        """Its open consumers (the management API lists their flow windows)."""
        return list(self._consumers.values())

    @property
    def flow_limit(self) -> int | None:
        """Its connection flow limit (``Broker.connect(flow_limit=)``; None: none)."""
        return self._gate.limit

    # ------------------------------------------------------------------ helpers

    def _check_open(self) -> None:
        if self.closed:
            raise IllegalBrokerState(
                f"connection {self._id} is closed; open a new connection with Broker.connect()"
            )
        self._broker.check_open()

    def _authorize(self, action: Action, kind: DestinationKind, name: str) -> None:
        """Security hook, called before an action has any effect (no routing, no
        auto-create). A connection's own temporary queues need no permission."""
        policy = self._broker.security
        if policy is None or (kind is DestinationKind.QUEUE and self._temps.owns(name)):
            return
        policy.authorize(self.principal, action, kind, name)

    def _consumer(self, consumer_id: int) -> ServerConsumer:
        c = self._consumers.get(consumer_id)
        if c is None:
            raise IllegalBrokerState(
                f"no consumer {consumer_id} on connection {self._id}: it was never created "
                "or is already closed"
            )
        return c

    def _check_tags(self, tags: list[int]) -> None:
        known = self._channel.tags
        staged = self._transactions.staged
        if _tags_known_once(known, staged, tags):
            return  # all known, none twice, none staged: the per-tag loop finds nothing
        seen: set[int] = set()
        for tag in tags:
            if tag not in known or tag in seen:
                raise IllegalBrokerState(
                    f"unknown delivery tag {tag} on connection {self._id}: it was never "
                    "delivered here, or was already acknowledged or cancelled (listed twice?)"
                    "; acknowledge or cancel each delivery exactly once"
                )
            if tag in staged:
                raise IllegalBrokerState(
                    f"delivery tag {tag} is already acknowledged in transaction "
                    f"{staged[tag]!r}; commit or roll back that transaction instead"
                )
            seen.add(tag)

    def _cancel_tags(self, tags: list[int], redelivered: bool,
                     unseen: Collection[int] = ()) -> set[QueueRef]:
        """Cancel in descending tag order so each queue gets its original order back."""
        touched: set[QueueRef] = set()
        owners = self._channel.tags
        with self._broker.post_office.batch():
            for tag in sorted(tags, reverse=True):
                c = owners.pop(tag)
                c.queue.cancel(c, tag, redelivered and tag not in unseen)
                touched.add(c.queue)
        return touched

    # ------------------------------------------------------------------ producing

    def send(self, message: ServerMessage, tx: str | None = None, *,
             ticket: object = None, timeout_ms: int = 0) -> bool:
        """Route (or stage in ``tx``) a message, stamping ``producer_connection`` for
        no_local. Returns True when done; False when producer flow control parked it
        (:mod:`.producer_flow`): ``callback.send_done(ticket, error)`` tells the outcome
        later, and ``timeout_ms`` > 0 fails it after that long. Without a ``ticket`` a
        send that would have to wait raises :class:`~.errors.ResourceLimitExceeded`.

        The common case, a message to an existing queue outside a transaction on an open
        broker without a security policy, with room, goes straight to the queue
        (``queue_run.route_fast``, one C call when compiled); the rest takes
        :meth:`_send_full`, the reference for every step."""
        if tx is None:
            if _route_fast(self, message):
                return True
            flow = self._broker.flow
            full = flow.must_wait(self, message)
            if full is not None:
                self._check_admissible(message)  # what a parked send must not wait for
                flow.park(self, ticket, message, None, full, timeout_ms)
                return False
        self._send_full(message, tx)
        return True

    def _send_full(self, message: ServerMessage, tx: str | None) -> None:
        """Every step of :meth:`send`, for every message."""
        self._check_open()
        self._route(message, tx)

    def _route(self, message: ServerMessage, tx: str | None) -> None:
        policy = self._broker.security
        if policy is not None:  # (the common no-policy case skips the calls)
            self._authorize("send", message.kind, message.destination)
            policy.stamp_identity(self.principal, message)
        message.producer_connection = self._id
        if tx is not None:
            self._transactions.stage_send(tx, message)
            return
        self._broker.post_office.route(message, self.client_id)

    def _check_admissible(self, message: ServerMessage) -> None:
        """Raise now, before it waits for space, what routing ``message`` would raise."""
        self._check_open()
        if self._broker.security is not None:
            self._authorize("send", message.kind, message.destination)
        self._broker.post_office.check_routable(message)

    def route_admitted(self, message: ServerMessage) -> None:
        """Route a send producer flow control does not hold (any more): a parked send
        that got its space (the broker's ProducerFlow), or the broker's own answer to this
        client (stats), which has no producer behind it and goes to a destination the
        client reads. Also once this connection has closed: a send its client wrote
        before it left (``close(keep_parked_sends=True)``), checked when it was parked."""
        self._route(message, None)

    def transaction_sends(self, tx: str | None) -> list[ServerMessage]:
        """The messages transaction ``tx`` would route at commit ([] if unknown)."""
        return self._transactions.sends(tx)

    # ------------------------------------------------------------------ consumers

    def create_consumer(
        self,
        consumer_id: int,
        kind: DestinationKind,
        destination: str,
        *,
        selector: str | None = None,
        no_local: bool = False,
        subscription_name: str | None = None,
        durable: bool = False,
        shared: bool = False,
        auto_ack: bool = False,
        credit: int = 0,
        backlog: int | None = None,
    ) -> ConsumerInfo:
        self._check_open()
        if backlog is not None and backlog < 1:
            raise IllegalBrokerState(f"backlog must be >= 1 (or None), got {backlog}")
        self._authorize("consume", kind, destination)
        if consumer_id in self._consumers:
            raise IllegalBrokerState(
                f"consumer id {consumer_id} is already in use on connection {self._id}; "
                "consumer ids must be unique per connection"
            )
        if credit < 0:
            raise IllegalBrokerState(f"credit must be >= 0, got {credit}")
        broker = self._broker
        selector = _norm_selector(selector)
        sub: Subscription | None = None
        if kind is DestinationKind.QUEUE:
            if durable or shared or subscription_name is not None:
                raise InvalidSubscription(
                    "durable and shared subscriptions exist only on topics; consume from "
                    f"queue {destination!r} without a subscription name"
                )
            flt = compile_filter(selector)
            q = broker.post_office.queue(destination, create=True)
            if q.owner_connection is not None and q.owner_connection != self._id:
                raise AccessDenied(
                    f"{destination!r} is a temporary queue of another connection; only the "
                    "connection that created it may consume from it (you may send to it)"
                )
        else:
            flt = None
            sub = attach_subscription(
                broker.post_office, broker.post_office.topic(destination),
                connection_id=self._id, client_id=self.client_id, consumer_id=consumer_id,
                selector=selector, no_local=no_local, name=subscription_name,
                durable=durable, shared=shared,
                may_replace=lambda old_topic: self._authorize(
                    "consume", DestinationKind.TOPIC, old_topic),
            )
            q = sub.queue
            if broker.security is not None and broker.security.enabled and is_wildcard(
                sub.topic
            ):
                sub.bound_readers(self.principal, broker.security.may_consume_topic,
                                  alone=not q.consumers)
        c = ServerConsumer(
            consumer_id, self._channel, q, flt, auto_ack, effective_flow_limit(q.settings), credit
        )
        self._consumers[consumer_id] = c
        if sub is not None:
            self._consumer_subs[consumer_id] = sub
        destination_limit = c.flow_limit
        granted = q.add_consumer(c, backlog)
        self._space_may_be_free()
        return ConsumerInfo(consumer_id, destination_limit, q.name, granted)

    def grant_credit(self, consumer_id: int, credits: int) -> None:
        c = self._consumer(consumer_id)
        if credits < 0:
            raise IllegalBrokerState(f"credits must be >= 0, got {credits}")
        c.queue.grant(c, credits)
        self._space_may_be_free()

    def credit(self, consumer_id: int) -> int:
        """The consumer's credit granted and not yet used: the one count of it, which a
        protocol session asks instead of keeping its own (0 once the consumer is gone)."""
        c = self._consumers.get(consumer_id)
        return 0 if c is None else c.credit

    def release_flow(self, count: int) -> None:
        """``count`` deliveries left the client's buffers (consumed or handed back): room
        under the connection's flow limit again (seed 004; :class:`.ConnectionGate`)."""
        self._check_open()
        self._gate.released(count, list(self._consumers.values()))

    def revoke_credit(self, consumer_id: int) -> int:
        c = self._consumer(consumer_id)
        unused = c.credit
        c.credit = 0  # the consumer leaves the dispatch ring lazily
        return unused

    def close_consumer(self, consumer_id: int, *, unseen: Collection[int] = ()) -> None:
        c = self._consumer(consumer_id)
        del self._consumers[consumer_id]
        c.closed = True
        # acks staged in a transaction stay with it: commit consumes them, rollback
        # returns them (Artemis keeps transactional acks of a closed consumer the same way)
        staged = self._transactions.staged
        tags = [t for t in c.delivering if t not in staged]
        self._cancel_tags(tags, True, unseen)
        self._detach(consumer_id, c)
        c.queue.dispatch()
        self._space_may_be_free()

    def _detach(self, consumer_id: int, c: ServerConsumer) -> None:
        c.queue.remove_consumer(c)
        sub = self._consumer_subs.pop(consumer_id, None)
        if sub is not None and not sub.durable and not sub.queue.consumers:
            self._broker.post_office.delete_subscription(sub)

    def unsubscribe(self, subscription_name: str) -> None:
        self._check_open()
        broker = self._broker
        sub = broker.post_office.subscription_named(("durable", self.client_id, subscription_name))
        if sub is None:
            raise InvalidSubscription(
                f"no durable subscription named {subscription_name!r} for client id "
                f"{self.client_id!r}; check the name and the connection's client id"
            )
        self._authorize("consume", DestinationKind.TOPIC, sub.topic)
        if sub.queue.consumers:
            raise IllegalBrokerState(
                f"durable subscription {subscription_name!r} has an active consumer; close "
                "it before unsubscribing"
            )
        broker.post_office.delete_subscription(sub)
        self._space_may_be_free()

    def _space_may_be_free(self) -> None:
        """Messages left RAM (taken, acknowledged, deleted): parked sends may go on."""
        flow = self._broker.flow
        if flow.parked:
            flow.resume()

    # ------------------------------------------------------------------ acks

    def ack(self, delivery_tags: list[int], tx: str | None = None) -> None:
        self._check_open()
        owners = self._channel.tags
        if tx is None and len(delivery_tags) == 1:  # the hot path: one ack per message
            tag = delivery_tags[0]
            c = owners.pop(tag, None) if tag not in self._transactions.staged else None
            if c is not None:
                q = c.queue
                q.acknowledge(c, tag)
                q.dispatch()
                if self._broker.flow.parked:
                    self._broker.flow.resume()
                return
        if tx is not None:
            txs = self._transactions
            txs.require(tx)  # an unknown transaction is reported before unknown tags
            self._check_tags(delivery_tags)
            txs.stage_acks(tx, delivery_tags)
            return
        self._check_tags(delivery_tags)
        store = self._broker.store
        if store is None:  # no store: no batch to open (a nullcontext per ack was measurable)
            touched = _acknowledge_tags(owners, delivery_tags)
        else:
            with store.batch():
                touched = _acknowledge_tags(owners, delivery_tags)
        for q in touched:
            q.dispatch()
        self._space_may_be_free()

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True,
               unseen: Collection[int] = ()) -> None:
        self._check_open()
        self._check_tags(delivery_tags)
        for q in self._cancel_tags(delivery_tags, redelivered, unseen):
            q.dispatch()

    def reject(self, delivery_tags: list[int], reason: str) -> None:
        """Dead-letter these deliveries with ``reason`` instead of redelivering them."""
        self._check_open()
        self._check_tags(delivery_tags)
        owners = self._channel.tags
        touched: set[QueueRef] = set()
        with self._broker.post_office.batch():
            for tag in delivery_tags:
                c = owners.pop(tag)
                c.queue.reject(c, tag, reason)
                touched.add(c.queue)
        for q in touched:
            q.dispatch()
        self._space_may_be_free()

    # ------------------------------------------------------------------ transactions

    def begin(self, tx: str) -> None:
        self._check_open()
        self._transactions.begin(tx)

    def commit(self, tx: str, *, ticket: object = None, timeout_ms: int = 0) -> bool:
        """Commit ``tx`` as one unit. Returns False when producer flow control parked it
        (its sends need space; see :meth:`send`), True when done."""
        self._check_open()
        return self._transactions.commit(tx, ticket, timeout_ms)

    def commit_admitted(self, tx: str) -> None:
        """Commit ``tx`` now (its space is there, or it needs none): called by the
        broker's ProducerFlow for a parked commit."""
        self._check_open()
        self._transactions.commit_admitted(tx)

    def rollback(self, tx: str) -> None:
        self._check_open()
        self._transactions.rollback(tx)

    # ------------------------------------------------------------------ browse / temp

    def browse(self, destination: str, selector: str | None = None) -> list[ServerMessage]:
        self._check_open()
        self._authorize("browse", DestinationKind.QUEUE, destination)
        flt = compile_filter(_norm_selector(selector))
        broker = self._broker
        q = broker.queues.get(destination)
        if q is None:
            if broker.settings_for(destination).auto_create and not destination.startswith(
                TEMP_PREFIX
            ):
                return []  # would be auto-created empty; don't create it just to look
            broker.post_office.queue(destination, create=False)  # raises DestinationNotFound
            return []
        if q.owner_connection is not None and q.owner_connection != self._id:
            raise AccessDenied(
                f"{destination!r} is a temporary queue of another connection; only its "
                "creator may browse it"
            )
        return q.browse(flt)

    def create_temporary_queue(self) -> str:
        self._check_open()
        return self._temps.create()

    def delete_temporary_queue(self, name: str) -> None:
        self._check_open()
        self._temps.delete(name)
        self._space_may_be_free()

    # ------------------------------------------------------------------ admin

    def stats(self, name: str, kind: DestinationKind = DestinationKind.QUEUE) -> DestinationStats:
        """``Broker.stats`` for a client: needs ``admin`` (a subscription queue counts as
        its topic). In-process operators call ``Broker.stats`` unchecked."""
        self._check_open()
        post = self._broker.post_office
        sub = post.subscription_of_queue(name) if kind is DestinationKind.QUEUE else None
        if sub is not None:
            self._authorize("admin", DestinationKind.TOPIC, sub.topic)
        else:
            self._authorize("admin", kind, name)
        return self._broker.stats(name, kind)

    def all_stats(self) -> list[DestinationStats]:
        """The stats of every destination this connection may administer."""
        self._check_open()
        policy = self._broker.security
        stats = self._broker.all_stats()
        return stats if policy is None else policy.visible_stats(self.principal, stats)

    # ------------------------------------------------------------------ close

    def close(self, *, keep_parked_sends: bool = False) -> None:
        """End the connection; ``keep_parked_sends``: its sends producer flow control
        holds still go through when there is room (the client wrote them, then left:
        ``ProducerFlow.forget``), else they are dropped and each ticket hears so."""
        if self.closed:
            return
        self.closed = True
        broker = self._broker
        broker.flow.forget(self, keep_sends=keep_parked_sends)
        self._transactions.clear()
        for c in self._consumers.values():
            c.closed = True
        touched = self._cancel_tags(list(self._channel.tags), True)
        for cid, c in list(self._consumers.items()):
            self._detach(cid, c)
        self._consumers.clear()
        self._temps.delete_all()
        broker.disconnected(self)
        for q in touched:
            if not q.deleted:
                q.dispatch()
        self._space_may_be_free()
