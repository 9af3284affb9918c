"""Acknowledgement modes as strategies: one object per mode, chosen when a session is made.

What "consumed" means (which is what opens the flow-control window), when the broker hears
of it, and what ``recover()``, a failed listener, a closed consumer and a dropped connection
do all differ per mode. Each class below owns its own bookkeeping of delivered but not yet
acknowledged messages; the session and its dispatcher only call the interface
(``delivered / processed / acknowledge / take_unacknowledged / connection_interrupted`` and
the transaction calls), as Qpid JMS's ``JmsTransactionContext`` keeps local and no
transactions apart. No code outside this module asks which mode a session is in.

* AUTO_ACKNOWLEDGE: consumed when ``receive()`` returns / the listener returns normally.
  A listener that raises gets its message redelivered (the broker counts the attempt).
  Over in-process transports the dispatcher may queue up to :data:`AUTO_ACK_BATCH`
  acknowledgements (``jmspy/_pure/dispatch.py`` says when they are sent).
* DUPS_OK_ACKNOWLEDGE: like AUTO, acknowledged in batches (``dupsOkBatchSize``) and
  whenever the consumer's buffer runs dry, so a crash may redeliver a few.
* CLIENT_ACKNOWLEDGE: ``message.acknowledge()`` consumes everything the session delivered.
* INDIVIDUAL_ACKNOWLEDGE: ``message.acknowledge()`` consumes that message only.
* SESSION_TRANSACTED: ``commit()`` consumes everything received in the transaction and
  publishes everything sent in it; ``rollback()`` redelivers and discards.
* NO_ACKNOWLEDGE: the broker forgets a message once delivered (at-most-once, like
  Artemis's pre-acknowledge); consumed when handed to the application. Messages still
  prefetched when the consumer closes are gone too: keep imqConsumerFlowLimit small.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable
from enum import IntEnum
from typing import TYPE_CHECKING, Protocol

from . import twins
from .errors import IllegalStateException, JMSException, TransactionRolledBackException

if TYPE_CHECKING:
    from .consumer import MessageConsumer
    from .message import Message
    from .session_connection import SessionConnection
    from .transport import Transport

__all__ = [
    "AUTO_ACK_BATCH",
    "AckHost",
    "AckMode",
    "AckModes",
    "Acknowledgement",
    "AutoAcknowledge",
    "ClientAcknowledge",
    "DupsOkAcknowledge",
    "IndividualAcknowledge",
    "LocalTransaction",
    "NoAcknowledge",
    "new_acknowledgement",
]


class AckMode(IntEnum):
    """The JMS acknowledgement modes (``Session.AUTO_ACKNOWLEDGE`` etc. are these)."""

    SESSION_TRANSACTED = 0
    AUTO_ACKNOWLEDGE = 1
    CLIENT_ACKNOWLEDGE = 2
    DUPS_OK_ACKNOWLEDGE = 3
    INDIVIDUAL_ACKNOWLEDGE = 4
    #: Not in JMS: Open MQ's and Artemis's pre-acknowledge (at-most-once).
    NO_ACKNOWLEDGE = 100


class AckModes:
    """The modes as class attributes of each class that takes one, as JMS spells them
    (``Session.AUTO_ACKNOWLEDGE``, ``JMSContext.CLIENT_ACKNOWLEDGE``,
    ``AsyncSession.NO_ACKNOWLEDGE``): one list, so those faces cannot drift apart."""

    __slots__ = ()

    SESSION_TRANSACTED = AckMode.SESSION_TRANSACTED
    AUTO_ACKNOWLEDGE = AckMode.AUTO_ACKNOWLEDGE
    CLIENT_ACKNOWLEDGE = AckMode.CLIENT_ACKNOWLEDGE
    DUPS_OK_ACKNOWLEDGE = AckMode.DUPS_OK_ACKNOWLEDGE
    INDIVIDUAL_ACKNOWLEDGE = AckMode.INDIVIDUAL_ACKNOWLEDGE
    NO_ACKNOWLEDGE = AckMode.NO_ACKNOWLEDGE


#: Most AUTO_ACKNOWLEDGE acknowledgements a listener dispatcher queues before sending
#: them. Only over in-process transports (``Transport.in_process``), where the client cannot
#: crash without the broker: over a network JMS AUTO allows at most the last message to be
#: redelivered after a client crash, so there every message is acknowledged on its own.
AUTO_ACK_BATCH = 128

#: (consumer, delivery tag): a message delivered to the application, in delivery order.
Delivered = tuple["MessageConsumer", int]

_tx_ids = itertools.count(1)
# the per-message loops of settling a batch, compiled (jmspy/_pure/dispatch.py says why)
_take_held = twins.dispatch.take_held
_held_tags = twins.dispatch.held_tags
_consumed_counts = twins.dispatch.consumed_counts


def _no_op_ack(message: Message) -> None:
    """``message.acknowledge()`` where it has nothing to do (AUTO, DUPS_OK, transacted)."""


class AckHost(Protocol):
    """What a strategy needs of its session (``jmspy.session.Session`` implements it)."""

    @property
    def _connection(self) -> SessionConnection: ...

    @property
    def _transport(self) -> Transport: ...

    def _check_open(self) -> None: ...

    def _in_listener(self) -> bool:
        """Whether the caller is the session's listener, inside ``on_message``."""

    def _return_to_broker(self, items: list[Delivered], *, rollback: str | None) -> None:
        """Hand back ``items`` and everything prefetched (rolling back ``rollback``)."""

    def _redeliver(self, consumer: MessageConsumer, message: Message) -> None:
        """AUTO/DUPS_OK: a listener failed (or called recover()): deliver it again."""


class Acknowledgement:
    """The interface, and what the modes share: a lock, a list of queued acknowledgements
    (AUTO coalesced by the dispatcher, DUPS_OK batches) and counting consumption."""

    mode: AckMode = AckMode.AUTO_ACKNOWLEDGE
    #: A listener that raises gets its message again (AUTO and DUPS_OK).
    redelivers_failures = False
    #: The broker forgets a message at delivery (NO_ACKNOWLEDGE): nothing to hand back.
    broker_forgets = False
    #: How many acknowledgements the listener dispatcher may queue (0: none; AUTO only).
    batch = 0

    def __init__(self, host: AckHost) -> None:
        self._host = host
        self._lock = threading.Lock()
        # Queued acknowledgements, sent by flush(). A deque: the dispatcher appends from
        # its thread while another may flush or forget, and deque appends and pops are
        # atomic, so the per-message append needs no lock (see hold).
        self._pending: deque[Delivered] = deque()
        #: Queue a ``(consumer, tag)`` acknowledgement for :meth:`flush` (the dispatcher's
        #: coalesced AUTO): the deque's own ``append``, a C call per message.
        self.hold: Callable[[Delivered], None] = self._pending.append
        #: How many acknowledgements are queued (the deque's ``len``): drain counts
        #: those a busy transport declined (:meth:`flush` with ``wait=False``) as its own.
        self.held_count: Callable[[], int] = self._pending.__len__
        #: The callable a delivered message's ``acknowledge()`` runs.
        self.acknowledger: Callable[[Message], None] = _no_op_ack
        #: recover() was called inside a listener: the dispatcher redelivers its message.
        self.recover_requested = False
        #: The open local transaction's id (sends and acks go in it), or None. Read by
        #: every send; written only by :class:`LocalTransaction`.
        self.tx: str | None = None

    def wrap_acknowledger(
            self, wrap: Callable[[Callable[[Message], None]], Callable[[Message], None]]
    ) -> None:
        """Run ``message.acknowledge()`` through ``wrap`` (the session's ``settle`` span,
        when its connection is instrumented); a mode where it does nothing stays so."""
        if self.acknowledger is not _no_op_ack:
            self.acknowledger = wrap(self.acknowledger)

    # -- a message's way through the application -------------------------------------
    def delivered(self, consumer: MessageConsumer, message: Message) -> None:
        """``message`` is being handed to the application (receive or listener)."""
        connection = self._host._connection
        drops = connection.drops  # read before the check: see Connection.drops
        if connection._dead(message._delivery_tag):
            # taken just as the connection dropped: already forgotten, nothing to ack
            message._acknowledger = _no_op_ack
            return
        message._acknowledger = self.acknowledger
        self._remember(consumer, message._delivery_tag, drops)

    def _remember(self, consumer: MessageConsumer, tag: int, drops: int) -> None:
        """The mode's bookkeeping for a delivered message (nothing by default); ``drops``
        is the connection's count of drops when the delivery was found alive."""

    def processed(self, consumer: MessageConsumer, message: Message, ok: bool) -> None:
        """``receive()`` returned ``message``, or its listener returned (``ok``) or raised."""

    def _take_pending(self) -> list[Delivered]:
        """Pop what is queued now, oldest first (appends meanwhile stay queued)."""
        return _take_held(self._pending)

    def flush(self, *, wait: bool = True) -> bool:
        """Send the queued acknowledgements; True when nothing is left queued.

        ``wait=False`` sends them only if the transport can take them without waiting
        for another thread (``Transport.try_ack``); if it cannot, they stay queued, in
        front of anything queued meanwhile, uncounted, and this returns False."""
        items = self._take_pending()
        if items:
            tags = _held_tags(items)
            if wait:
                self._host._transport.ack(tags)
            elif not self._host._transport.try_ack(tags):
                self._pending.extendleft(reversed(items))
                return False
            self._count_consumed(items)
        return True

    # -- the application's calls ------------------------------------------------------
    def acknowledge(self) -> None:
        """``session.acknowledge()``: everything this session delivered and did not ack."""
        self._host._check_open()
        items = self.take_unacknowledged()
        if items:
            self._host._transport.ack(_held_tags(items))
            self._count_consumed(items)

    def take_unacknowledged(self) -> list[Delivered]:
        """Forget and return the delivered, unacknowledged messages, in delivery order."""
        return []

    def recover(self) -> None:
        """``session.recover()``: redeliver from the oldest unacknowledged message."""
        self._host._return_to_broker(self.take_unacknowledged(), rollback=None)

    def commit(self) -> None:
        raise IllegalStateException(
            "commit() called on a non-transacted session; create it with "
            "connection.create_session(transacted=True)"
        )

    def rollback(self) -> None:
        raise IllegalStateException(
            "rollback() called on a non-transacted session; use recover() to redeliver "
            "unacknowledged messages, or create the session with transacted=True"
        )

    # -- the session's life ------------------------------------------------------------
    def forget(self, consumer: MessageConsumer) -> list[int]:
        """``consumer`` closes: drop what it delivered; returns its queued acks' tags (they
        were processed, so the caller acknowledges them rather than let them redeliver)."""
        items = self._take_pending()
        # what stays goes back in front of anything appended meanwhile (it is older)
        self._pending.extendleft(reversed([(c, t) for c, t in items if c is not consumer]))
        with self._lock:
            self._forget(consumer)
        return [tag for c, tag in items if c is consumer]

    def _forget(self, consumer: MessageConsumer) -> None:
        """The mode's part of :meth:`forget` (called under the lock)."""

    def connection_interrupted(self) -> None:
        """The connection dropped: the broker redelivers everything unacknowledged."""
        self._take_pending()
        with self._lock:
            self._interrupted()

    def _interrupted(self) -> None:
        """The mode's part of :meth:`connection_interrupted` (called under the lock)."""

    def connection_resumed(self) -> None:
        """The connection is back (the transacted mode needs a new transaction)."""

    def close(self) -> None:
        """The session closes: settle what is queued (the transaction rolls back)."""
        self.flush()

    def _count_consumed(self, items: list[Delivered]) -> None:
        """Tell each consumer how many of ``items`` it delivered were consumed, in the
        order the consumers first appear in ``items``."""
        # tags at or below the floor were forgotten when the connection dropped; a drop
        # after these reads makes the counts stale (the consumer checks ``drops``)
        connection = self._host._connection
        drops = connection.drops
        floor = connection.dead_tag_floor  # see Connection._dead
        for consumer, n in _consumed_counts(items, floor):
            consumer._consumed(n, drops)


class AutoAcknowledge(Acknowledgement):
    mode = AckMode.AUTO_ACKNOWLEDGE
    redelivers_failures = True

    def __init__(self, host: AckHost, batch: int) -> None:
        super().__init__(host)
        self.batch = batch

    def processed(self, consumer: MessageConsumer, message: Message, ok: bool) -> None:
        connection = self._host._connection
        drops = connection.drops
        if connection._dead(message._delivery_tag):
            return  # its connection dropped: the broker redelivers it
        if ok:
            self._host._transport.ack([message._delivery_tag])
            consumer._consumed(1, drops)
        else:
            self._host._redeliver(consumer, message)

    def recover(self) -> None:
        # Only the message a listener is handling right now is unacknowledged.
        if self._host._in_listener():
            self.recover_requested = True


class DupsOkAcknowledge(AutoAcknowledge):
    mode = AckMode.DUPS_OK_ACKNOWLEDGE

    def __init__(self, host: AckHost, dups_batch: int) -> None:
        super().__init__(host, 0)
        self._dups_batch = dups_batch

    def processed(self, consumer: MessageConsumer, message: Message, ok: bool) -> None:
        if self._host._connection._dead(message._delivery_tag):
            return
        if ok:
            self._pending.append((consumer, message._delivery_tag))
            if len(self._pending) >= self._dups_batch or not consumer._has_buffered():
                self.flush()
        else:
            self.flush()
            self._host._redeliver(consumer, message)


class _Unacknowledged(Acknowledgement):
    """The modes that remember every delivered message until it is settled as a whole
    (CLIENT's acknowledge(), the transaction's commit or rollback), in delivery order."""

    def __init__(self, host: AckHost) -> None:
        super().__init__(host)
        self._unacked: list[Delivered] = []

    def _remember(self, consumer: MessageConsumer, tag: int, drops: int) -> None:
        with self._lock:  # a drop since the check forgot it already (_interrupted)
            if drops == self._host._connection.drops:
                self._unacked.append((consumer, tag))

    def take_unacknowledged(self) -> list[Delivered]:
        with self._lock:
            items, self._unacked = self._unacked, []
        return items

    def _forget(self, consumer: MessageConsumer) -> None:
        self._unacked = [(c, t) for c, t in self._unacked if c is not consumer]

    def _interrupted(self) -> None:
        self._unacked = []


class ClientAcknowledge(_Unacknowledged):
    mode = AckMode.CLIENT_ACKNOWLEDGE

    def __init__(self, host: AckHost) -> None:
        super().__init__(host)
        self.acknowledger = self._acknowledge_message

    def _acknowledge_message(self, _message: Message) -> None:
        self.acknowledge()


class IndividualAcknowledge(Acknowledgement):
    mode = AckMode.INDIVIDUAL_ACKNOWLEDGE

    def __init__(self, host: AckHost) -> None:
        super().__init__(host)
        self._unacked: dict[int, MessageConsumer] = {}  # tag -> consumer, delivery order
        self.acknowledger = self._acknowledge_one

    def _acknowledge_one(self, message: Message) -> None:
        self._host._check_open()
        tag = message._delivery_tag
        with self._lock:
            consumer = self._unacked.pop(tag, None)
        connection = self._host._connection
        drops = connection.drops
        if consumer is not None and not connection._dead(tag):
            self._host._transport.ack([tag])
            consumer._consumed(1, drops)

    def _remember(self, consumer: MessageConsumer, tag: int, drops: int) -> None:
        with self._lock:  # a drop since the check forgot it already (_interrupted)
            if drops == self._host._connection.drops:
                self._unacked[tag] = consumer

    def acknowledge_messages(self, messages: Iterable[Message]) -> None:
        """Acknowledge these messages, and only them, in one call: their ACK frames go
        out in one write and each consumer's credit comes back once (a Spark micro-batch
        acknowledges tens of thousands at its commit; one call each cost a lock, a
        ``sendall`` and a credit top-up per message)."""
        self._settle_messages(messages, self._host._transport.ack)

    def lend_messages(self, messages: Iterable[Message], token: str,
                      ttl_ms: int | None) -> None:
        """Lend these messages to the reading lease ``token`` (``Session.lend_messages``):
        for this session they are settled, as by an acknowledgement."""
        transport = self._host._transport
        self._settle_messages(messages, lambda tags: transport.lend(tags, token, ttl_ms))

    def _settle_messages(self, messages: Iterable[Message],
                         settle: Callable[[list[int]], None]) -> None:
        """Forget these messages' deliveries, ``settle`` their tags in one call, and give
        their consumers the credit back."""
        self._host._check_open()
        items: list[Delivered] = []
        with self._lock:
            unacked = self._unacked
            for message in messages:
                tag = message._delivery_tag
                consumer = unacked.pop(tag, None)
                if consumer is not None:
                    items.append((consumer, tag))
        dead = self._host._connection._dead  # a dropped connection's tags: nothing to ack
        items = [item for item in items if not dead(item[1])]
        if items:
            settle(_held_tags(items))
            self._count_consumed(items)

    def take_unacknowledged(self) -> list[Delivered]:
        with self._lock:
            items = [(c, tag) for tag, c in self._unacked.items()]
            self._unacked.clear()
        return items

    def _forget(self, consumer: MessageConsumer) -> None:
        self._unacked = {t: c for t, c in self._unacked.items() if c is not consumer}

    def _interrupted(self) -> None:
        self._unacked = {}


class NoAcknowledge(Acknowledgement):
    mode = AckMode.NO_ACKNOWLEDGE
    broker_forgets = True

    def _remember(self, consumer: MessageConsumer, tag: int, drops: int) -> None:
        consumer._consumed(1, drops)

    def recover(self) -> None:
        """Nothing to redeliver: the broker has already forgotten every delivered message."""


class LocalTransaction(_Unacknowledged):
    """SESSION_TRANSACTED: received messages and sends belong to the open transaction."""

    mode = AckMode.SESSION_TRANSACTED

    def __init__(self, host: AckHost) -> None:
        super().__init__(host)
        self._lost = False  # the connection dropped during the open transaction
        self.tx = self._begin()

    def _begin(self) -> str:
        tx = f"tx-{self._host._connection._instance}-{next(_tx_ids)}"
        self._host._transport.begin(tx)
        return tx

    def acknowledge(self) -> None:
        """Acknowledgement is the commit's job here; ``session.acknowledge()`` is a no-op."""
        self._host._check_open()

    def recover(self) -> None:
        raise IllegalStateException(
            "recover() is not allowed on a transacted session; use rollback()"
        )

    def commit(self) -> None:
        host = self._host
        with self._lock:
            items, self._unacked = self._unacked, []
            lost, self._lost = self._lost, False
        if lost:
            self._lost_transaction()
        tx = self.tx
        assert tx is not None
        try:
            if items:
                host._transport.ack(_held_tags(items), tx)
            host._transport.commit(tx)
        except JMSException as exc:
            with self._lock:
                # a drop under this commit is this failure: the transaction that
                # spans it is the one reported rolled back, not the next one
                self._lost = False
            host._return_to_broker(items, rollback=tx)
            try:
                self.tx = self._begin()
            except Exception:  # the broker closed after refusing: why the commit failed
                pass  # is the news; the next call on this session meets the closed link
            raise TransactionRolledBackException(
                f"commit failed and the transaction was rolled back: {exc}"
            ) from exc
        self.tx = self._begin()
        self._count_consumed(items)

    def rollback(self) -> None:
        host = self._host
        with self._lock:
            items, self._unacked = self._unacked, []
            self._lost = False
        host._return_to_broker(items, rollback=self.tx)
        self.tx = self._begin()

    def _lost_transaction(self) -> None:
        """commit() after the connection dropped: the broker discarded the transaction
        (and will redeliver what it delivered), so the commit must fail, not half-happen."""
        try:
            if self.tx is not None:
                self._host._transport.rollback(self.tx)  # what was sent since the reconnect
        except JMSException:
            pass
        try:
            self.tx = self._begin()
        except JMSException:
            self._lost = True  # still down: the next commit fails the same way
        # gone for good: why (a broker's ERROR before it closed, say) is the news
        lost = self._host._connection._lost
        raise TransactionRolledBackException(
            "the connection to the broker was interrupted during this transaction, so the "
            "broker rolled it back: messages sent in it were discarded and messages "
            "received in it will be redelivered" + (f" ({lost})" if lost is not None else "")
        )

    def _interrupted(self) -> None:
        super()._interrupted()
        self._lost = True

    def connection_resumed(self) -> None:
        self.tx = self._begin()

    def close(self) -> None:
        super().close()
        if self.tx is not None:
            self._host._return_to_broker(self.take_unacknowledged(), rollback=self.tx)


def new_acknowledgement(
    host: AckHost, mode: AckMode, *, auto_batch: int, dups_batch: int
) -> Acknowledgement:
    """The strategy for ``mode``; ``auto_batch`` bounds the dispatcher's coalesced AUTO
    acknowledgements, ``dups_batch`` is DUPS_OK's batch (``dupsOkBatchSize``)."""
    if mode is AckMode.AUTO_ACKNOWLEDGE:
        return AutoAcknowledge(host, auto_batch)
    if mode is AckMode.DUPS_OK_ACKNOWLEDGE:
        return DupsOkAcknowledge(host, dups_batch)
    if mode is AckMode.CLIENT_ACKNOWLEDGE:
        return ClientAcknowledge(host)
    if mode is AckMode.INDIVIDUAL_ACKNOWLEDGE:
        return IndividualAcknowledge(host)
    if mode is AckMode.NO_ACKNOWLEDGE:
        return NoAcknowledge(host)
    return LocalTransaction(host)
