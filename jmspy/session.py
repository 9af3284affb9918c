"""Sessions: the unit of acknowledgement, transactions and listener threading.

JMS makes a session single-threaded: its listeners run one at a time, in order, on one
thread of the session's own (jmspy/session_dispatch.py), never the transport's.

Acknowledgement modes and what "consumed" (which opens the flow-control window) means:

* AUTO_ACKNOWLEDGE: consumed when ``receive()`` returns / the listener returns normally.
  A listener that raises gets its message redelivered (the broker counts the attempt).
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
from collections import Counter
from collections.abc import Callable
from operator import itemgetter
from typing import TYPE_CHECKING, cast

from . import _speedups
from .consumer import MessageConsumer, QueueBrowser, check_selector
from .destinations import Destination, Queue, TemporaryQueue, Topic
from .errors import (
    IllegalStateException,
    InvalidDestinationException,
    JMSException,
    TransactionRolledBackException,
)
from .message import BytesMessage, MapMessage, Message, PropertyValue, TextMessage
from .producer import MessageProducer
from .session_dispatch import SessionDispatcher
from .transport import Capability, ConsumerSpec

if TYPE_CHECKING:
    from .connection import Connection

__all__ = ["AUTO_ACK_BATCH", "Session"]

_tx_ids = itertools.count(1)
#: TextMessage(text, properties) (compiled twin, or pure under JMSPY_PUREPYTHON).
_new_text_message: Callable[[str | None, dict[str, PropertyValue] | None], TextMessage] = (
    _speedups.load("message_new").new_text_message
)
# (consumer, delivery tag) pairs, taken apart in C loops (a coalesced AUTO flush is ~128).
_consumer_of = itemgetter(0)
_tag_of = itemgetter(1)

#: Most AUTO_ACKNOWLEDGE acknowledgements a listener dispatcher queues before sending
#: them (see jmspy/_pure/dispatch.py for when they are sent earlier). Only over in-process
#: transports (Capability.IN_PROCESS), where the client cannot crash without the broker:
#: over a network JMS AUTO allows at most the last message to be redelivered after a
#: client crash, so there every message is acknowledged on its own.
AUTO_ACK_BATCH = 128


def _no_op_ack(message: Message) -> None:
    """acknowledge() in modes where it has nothing to do (AUTO, DUPS_OK, transacted)."""


class Session(SessionDispatcher):
    """Creates producers, consumers and messages; owns acknowledgement and transactions.

    The listener dispatcher thread is the :class:`SessionDispatcher` half
    (jmspy/session_dispatch.py)."""

    SESSION_TRANSACTED = 0
    AUTO_ACKNOWLEDGE = 1
    CLIENT_ACKNOWLEDGE = 2
    DUPS_OK_ACKNOWLEDGE = 3
    INDIVIDUAL_ACKNOWLEDGE = 4
    NO_ACKNOWLEDGE = 100

    _MODE_NAMES = {
        0: "SESSION_TRANSACTED",
        1: "AUTO_ACKNOWLEDGE",
        2: "CLIENT_ACKNOWLEDGE",
        3: "DUPS_OK_ACKNOWLEDGE",
        4: "INDIVIDUAL_ACKNOWLEDGE",
        100: "NO_ACKNOWLEDGE",
    }

    def __init__(self, connection: Connection, transacted: bool, ack_mode: int) -> None:
        if ack_mode not in self._MODE_NAMES:
            raise JMSException(
                f"unknown acknowledge mode {ack_mode!r}; use one of "
                + ", ".join(f"Session.{n}" for n in self._MODE_NAMES.values())
            )
        if transacted:
            ack_mode = Session.SESSION_TRANSACTED
        elif ack_mode == Session.SESSION_TRANSACTED:
            transacted = True
        self._connection = connection
        self._transport = connection._transport
        self._auto_ack_batch = (
            AUTO_ACK_BATCH if Capability.IN_PROCESS in self._transport.capabilities else 1
        )
        self.transacted = transacted
        self.ack_mode = ack_mode
        self._closed = False
        self._closing = False
        self._consumers: dict[int, MessageConsumer] = {}
        self._producers: list[MessageProducer] = []
        # acknowledgement bookkeeping (delivery order matters for redelivery order)
        self._ack_lock = threading.Lock()
        self._unacked: list[tuple[MessageConsumer, int]] = []
        self._individual: dict[int, MessageConsumer] = {}
        self._dups_pending: list[tuple[MessageConsumer, int]] = []
        self._dups_batch: int = connection._properties["dupsOkBatchSize"]
        self._recover_current = False
        self._acknowledger = {
            Session.CLIENT_ACKNOWLEDGE: self._acknowledge_all,
            Session.INDIVIDUAL_ACKNOWLEDGE: self._acknowledge_one,
        }.get(ack_mode, _no_op_ack)
        self._init_dispatcher()  # the listener thread, started by the first listener
        self._tx: str | None = None
        self._tx_lost = False  # the connection dropped during the open transaction
        if transacted:
            self._tx = self._new_tx()

    # -- factories --------------------------------------------------------------------
    def create_queue(self, name: str) -> Queue:
        return Queue(name)

    def create_topic(self, name: str) -> Topic:
        return Topic(name)

    def create_temporary_queue(self) -> TemporaryQueue:
        self._check_open()
        return TemporaryQueue(self._transport.create_temporary_queue(), self._connection)

    def create_message(self, properties: dict[str, PropertyValue] | None = None) -> Message:
        return Message(properties)

    def create_text_message(
        self, text: str | None = None, properties: dict[str, PropertyValue] | None = None
    ) -> TextMessage:
        # TextMessage(text, properties), through the message_new twin (compiled: no
        # __init__ frames; jmspy/_pure/message_new.py)
        return _new_text_message(text, properties)

    def create_bytes_message(
        self, data: bytes | None = None, properties: dict[str, PropertyValue] | None = None
    ) -> BytesMessage:
        return BytesMessage(data, properties)

    def create_map_message(
        self,
        values: dict[str, PropertyValue | bytes] | None = None,
        properties: dict[str, PropertyValue] | None = None,
    ) -> MapMessage:
        return MapMessage(values, properties)

    def create_producer(
        self,
        destination: Destination | None = None,
        *,
        delivery_mode: int | None = None,
        priority: int | None = None,
        time_to_live: float | None = None,
        delivery_delay: float | None = None,
    ) -> MessageProducer:
        """A producer for ``destination`` (None: name the destination on each send)."""
        self._check_open()
        producer = MessageProducer(self, destination)
        if delivery_mode is not None:
            producer.delivery_mode = delivery_mode
        if priority is not None:
            producer.priority = priority
        if time_to_live is not None:
            producer.time_to_live = time_to_live
        if delivery_delay is not None:
            producer.delivery_delay = delivery_delay
        self._producers.append(producer)
        return producer

    def create_consumer(
        self, destination: Destination, selector: str | None = None, no_local: bool = False
    ) -> MessageConsumer:
        """A consumer on a queue, or a non-durable subscription on a topic."""
        return self._create_consumer(destination, selector, no_local=no_local)

    def create_durable_consumer(
        self, topic: Topic, name: str, selector: str | None = None, no_local: bool = False
    ) -> MessageConsumer:
        """An unshared durable subscription (needs the connection's client id)."""
        return self._create_consumer(
            topic, selector, no_local=no_local, subscription=name, durable=True
        )

    create_durable_subscriber = create_durable_consumer

    def create_shared_consumer(
        self, topic: Topic, name: str, selector: str | None = None
    ) -> MessageConsumer:
        """A shared non-durable subscription: consumers with the same name share messages."""
        return self._create_consumer(topic, selector, subscription=name, shared=True)

    def create_shared_durable_consumer(
        self, topic: Topic, name: str, selector: str | None = None
    ) -> MessageConsumer:
        """A shared durable subscription (JMS 2.0): survives with no consumer attached."""
        return self._create_consumer(
            topic, selector, subscription=name, durable=True, shared=True
        )

    def unsubscribe(self, name: str) -> None:
        """Delete a durable subscription and the messages it holds."""
        self._check_open()
        self._transport.unsubscribe(name)

    def create_browser(self, queue: Queue, selector: str | None = None) -> QueueBrowser:
        self._check_open()
        if not isinstance(queue, Queue):
            raise InvalidDestinationException(
                f"a browser looks at a queue, not {queue}; topics have no backlog to browse"
            )
        return QueueBrowser(self, queue, check_selector(selector))

    def _create_consumer(
        self,
        destination: Destination,
        selector: str | None,
        *,
        no_local: bool = False,
        subscription: str | None = None,
        durable: bool = False,
        shared: bool = False,
    ) -> MessageConsumer:
        self._check_open()
        if not isinstance(destination, Destination):
            raise InvalidDestinationException(
                f"expected a Queue or Topic, got {destination!r}; use "
                "session.create_queue(name) or session.create_topic(name)"
            )
        if subscription is not None and not isinstance(destination, Topic):
            raise InvalidDestinationException(
                f"subscriptions are for topics; {destination} is a queue"
            )
        selector = check_selector(selector)
        conn = self._connection
        props = conn._properties
        limit: int = props["imqConsumerFlowLimit"]
        threshold: int = props["imqConsumerFlowThreshold"]
        consumer_id = conn._next_consumer_id()
        spec = ConsumerSpec(
            consumer_id=consumer_id,
            destination=destination,
            selector=selector,
            no_local=no_local,
            subscription_name=subscription,
            durable=durable,
            shared=shared,
            auto_ack=self.ack_mode == Session.NO_ACKNOWLEDGE,
            flow_limit=limit,
            flow_threshold=threshold,
        )
        remote = self._transport.create_consumer(spec)
        consumer = MessageConsumer(
            self, consumer_id, destination, selector, limit, threshold,
            remote.destination_flow_limit,
        )
        self._consumers[consumer_id] = consumer
        conn._register_consumer(consumer)
        conn._flow.add(consumer)
        if consumer._buffer.limit > 0:
            conn._flow.top_up(consumer)
        return consumer

    # -- transactions and acknowledgement ---------------------------------------------
    def commit(self) -> None:
        """Consume everything received and publish everything sent in this transaction."""
        self._check_open()
        if not self.transacted:
            raise IllegalStateException(
                "commit() called on a non-transacted session; create it with "
                "connection.create_session(transacted=True)"
            )
        assert self._tx is not None
        self._connection._drain_async_sends(self)
        with self._ack_lock:
            items, self._unacked = self._unacked, []
            lost, self._tx_lost = self._tx_lost, False
        if lost:
            self._lost_transaction()
        try:
            if items:
                self._transport.ack([tag for _, tag in items], self._tx)
            self._transport.commit(self._tx)
        except JMSException as exc:
            self._return_to_broker(items, rollback_tx=True)
            try:
                self._tx = self._new_tx()
            except Exception:  # the broker closed after refusing: why the commit failed
                pass  # is the news; the next call on this session meets the closed link
            raise TransactionRolledBackException(
                f"commit failed and the transaction was rolled back: {exc}"
            ) from exc
        self._tx = self._new_tx()
        self._count_consumed(items)

    def rollback(self) -> None:
        """Redeliver what was received and discard what was sent in this transaction."""
        self._check_open()
        if not self.transacted:
            raise IllegalStateException(
                "rollback() called on a non-transacted session; use recover() to redeliver "
                "unacknowledged messages, or create the session with transacted=True"
            )
        self._connection._drain_async_sends(self)
        with self._ack_lock:
            items, self._unacked = self._unacked, []
            self._tx_lost = False
        self._return_to_broker(items, rollback_tx=True)
        self._tx = self._new_tx()

    def _lost_transaction(self) -> None:
        """commit() after the connection dropped: the broker discarded the transaction
        (and will redeliver what it delivered), so the commit must fail, not half-happen."""
        try:
            if self._tx is not None:
                self._transport.rollback(self._tx)  # what was sent since the reconnect
        except JMSException:
            pass
        try:
            self._tx = self._new_tx()
        except JMSException:
            self._tx_lost = True  # still down: the next commit fails the same way
        raise TransactionRolledBackException(
            "the connection to the broker was interrupted during this transaction, so the "
            "broker rolled it back: messages sent in it were discarded and messages "
            "received in it will be redelivered"
        )

    def _connection_interrupted(self) -> None:
        """Drop the ack bookkeeping of the dropped connection (see Connection)."""
        with self._ack_lock:
            self._unacked = []
            self._individual = {}
            self._dups_pending = []
            if self.transacted:
                self._tx_lost = True
        for consumer in list(self._consumers.values()):
            consumer._interrupted()

    def _connection_resumed(self) -> None:
        """A transacted session needs a transaction on the new connection; commit()
        still fails (``_tx_lost``) because the old one is gone."""
        if self.transacted and not self._closed and not self._closing:
            self._tx = self._new_tx()

    def recover(self) -> None:
        """Stop and restart delivery from the oldest unacknowledged message."""
        self._check_open()
        if self.transacted:
            raise IllegalStateException(
                "recover() is not allowed on a transacted session; use rollback()"
            )
        if self.ack_mode == Session.NO_ACKNOWLEDGE:
            return  # the broker has already forgotten every delivered message
        if self.ack_mode in (Session.AUTO_ACKNOWLEDGE, Session.DUPS_OK_ACKNOWLEDGE):
            # Only the message a listener is handling right now is unacknowledged.
            if self._on_dispatcher_thread() and self._current is not None:
                self._recover_current = True
            return
        with self._ack_lock:
            if self.ack_mode == Session.INDIVIDUAL_ACKNOWLEDGE:
                items = [(c, tag) for tag, c in self._individual.items()]
                self._individual.clear()
            else:
                items, self._unacked = self._unacked, []
        self._return_to_broker(items, rollback_tx=False)

    def acknowledge(self) -> None:
        """Acknowledge every message this session delivered (CLIENT_ACKNOWLEDGE)."""
        self._acknowledge_all(None)

    def _acknowledge_all(self, _message: Message | None) -> None:
        self._check_open()
        if self.ack_mode == Session.INDIVIDUAL_ACKNOWLEDGE:
            with self._ack_lock:
                items = [(c, tag) for tag, c in self._individual.items()]
                self._individual.clear()
        else:
            with self._ack_lock:
                items, self._unacked = self._unacked, []
        if items:
            self._transport.ack([tag for _, tag in items])
            self._count_consumed(items)

    def _acknowledge_one(self, message: Message) -> None:
        self._check_open()
        tag = message._delivery_tag
        with self._ack_lock:
            consumer = self._individual.pop(tag, None)
        if consumer is not None and not self._connection._dead(tag):
            self._transport.ack([tag])
            consumer._consumed(1)

    def _count_consumed(self, items: list[tuple[MessageConsumer, int]]) -> None:
        """Tell each consumer how many of ``items`` it delivered were consumed, in the
        order the consumers first appear in ``items``."""
        floor = self._connection._dead_tag_floor  # see Connection._dead
        if floor > 0:  # forgotten when the connection dropped
            items = [item for item in items if item[1] > floor]
        if len(items) == 1:
            items[0][0]._consumed(1)
            return
        for consumer, n in Counter(map(_consumer_of, items)).items():
            consumer._consumed(n)

    def _pause(self, consumer: MessageConsumer) -> None:
        """Take back the consumer's unused credit so nothing new arrives while we hand
        messages back; otherwise the broker would re-dispatch each returned message to
        it at once, out of order and counted as redelivered."""
        returned = self._transport.revoke_credit(consumer.consumer_id)
        with consumer._lock:
            consumer._buffer.revoked(returned)

    def _return_to_broker(
        self, items: list[tuple[MessageConsumer, int]], *, rollback_tx: bool
    ) -> None:
        """Give back consumed-but-unacknowledged messages and everything prefetched.

        Prefetched messages are cancelled first and the app-seen ones after: the broker
        puts cancelled messages back at the head, so this restores the original order.
        """
        taken: dict[MessageConsumer, int] = {}
        for consumer, _ in items:
            taken[consumer] = taken.get(consumer, 0) + 1
        consumers = list(self._consumers.values())
        for consumer in consumers:
            self._pause(consumer)
        for consumer in consumers:
            drained = consumer._returned(taken.get(consumer, 0))
            if drained:
                self._transport.cancel([m._delivery_tag for m in drained], redelivered=False)
        if rollback_tx and self._tx is not None:
            self._transport.rollback(self._tx)
        tags = [tag for consumer, tag in items if not consumer.closed]
        if tags:
            self._transport.cancel(tags, redelivered=True)
        for consumer in consumers:
            self._resume(consumer)

    def _resume(self, consumer: MessageConsumer) -> None:
        self._connection._flow.top_up(consumer)
        if consumer._buffer.limit == 0 and consumer._listener is not None:
            consumer._pull_one()

    def _new_tx(self) -> str:
        tx = f"tx-{self._connection._instance}-{next(_tx_ids)}"
        self._transport.begin(tx)
        return tx

    # -- per-message hooks (called on the thread that hands the message to the app) ----
    def _delivered_to_app(self, consumer: MessageConsumer, message: Message) -> None:
        if self._connection._dead(message._delivery_tag):
            # taken just as the connection dropped: already forgotten, nothing to ack
            message._acknowledger = _no_op_ack
            return
        message._acknowledger = self._acknowledger
        mode = self.ack_mode
        if mode == Session.CLIENT_ACKNOWLEDGE or mode == Session.SESSION_TRANSACTED:
            with self._ack_lock:
                self._unacked.append((consumer, message._delivery_tag))
        elif mode == Session.INDIVIDUAL_ACKNOWLEDGE:
            with self._ack_lock:
                self._individual[message._delivery_tag] = consumer
        elif mode == Session.NO_ACKNOWLEDGE:
            consumer._consumed(1)

    def _processing_done(self, consumer: MessageConsumer, message: Message, ok: bool) -> None:
        if self._connection._dead(message._delivery_tag):
            return  # its connection dropped: the broker redelivers it
        mode = self.ack_mode
        if mode == Session.AUTO_ACKNOWLEDGE:
            if ok:
                self._transport.ack([message._delivery_tag])
                consumer._consumed(1)
            else:
                self._redeliver(consumer, message)
        elif mode == Session.DUPS_OK_ACKNOWLEDGE:
            if ok:
                with self._ack_lock:
                    self._dups_pending.append((consumer, message._delivery_tag))
                    flush = len(self._dups_pending) >= self._dups_batch
                if flush or not consumer._has_buffered():
                    self._flush_dups()
            else:
                self._flush_dups()
                self._redeliver(consumer, message)

    def _flush_dups(self) -> None:
        """Send the queued DUPS_OK (or coalesced AUTO) acknowledgements."""
        with self._ack_lock:
            items, self._dups_pending = self._dups_pending, []
        if items:
            self._transport.ack(list(map(_tag_of, items)))
            self._count_consumed(items)

    def _redeliver(self, consumer: MessageConsumer, message: Message) -> None:
        """AUTO/DUPS_OK: a listener failed (or called recover()): deliver it again."""
        self._pause(consumer)
        drained = consumer._returned(1)
        if drained:
            self._transport.cancel([m._delivery_tag for m in drained], redelivered=False)
        self._transport.cancel([message._delivery_tag], redelivered=True)
        self._resume(consumer)

    # -- closing ------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed or self._closing:
            raise IllegalStateException("the session is closed; create a new session")
        self._connection._check_open()

    def _close_consumer(self, consumer: MessageConsumer) -> None:
        if consumer._closed:
            return
        if self._on_dispatcher_thread() and self._current is consumer:
            with consumer._lock:
                consumer._listener = None  # no further messages for it
            self._deferred.append(consumer)
            return
        if self.ack_mode != Session.NO_ACKNOWLEDGE:
            self._pause(consumer)
        with consumer._lock:
            consumer._closed = True
            consumer._listener = None
            drained = cast(list[Message], consumer._buffer.drain())
            consumer._cond.notify_all()
        self._consumers.pop(consumer.consumer_id, None)
        with self._ack_lock:
            self._unacked = [(c, t) for c, t in self._unacked if c is not consumer]
            self._individual = {t: c for t, c in self._individual.items() if c is not consumer}
            pending_dups = [(c, t) for c, t in self._dups_pending if c is consumer]
            self._dups_pending = [(c, t) for c, t in self._dups_pending if c is not consumer]
        if pending_dups:
            self._transport.ack([t for _, t in pending_dups])
        if drained and self.ack_mode != Session.NO_ACKNOWLEDGE:
            # (NO_ACKNOWLEDGE: the broker forgot them at delivery; at-most-once.)
            self._transport.cancel([m._delivery_tag for m in drained], redelivered=False)
        self._connection._unregister_consumer(consumer)
        self._transport.close_consumer(consumer.consumer_id)
        self._connection._flow.remove(consumer)

    def close(self) -> None:
        """Close the session: roll back an open transaction, stop its consumers.

        Blocks until a running listener returns, unless called from that listener, in
        which case the close completes right after the listener returns.
        """
        if self._closed or self._closing:
            return
        if self._on_dispatcher_thread():
            self._closing = True
            self._deferred.append(None)
            return
        self._do_close()

    def _do_close(self) -> None:
        if self._closed:
            return
        self._closing = True
        self._wake()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            timeout = self._connection._properties["closeTimeout"]
            thread.join(timeout or None)
            if thread.is_alive():
                self._connection._report(
                    JMSException(
                        f"session close gave up waiting {timeout}s for a running listener",
                        error_code="CLOSE_TIMEOUT",
                    )
                )
        self._connection._drain_async_sends(self)
        try:
            self._flush_dups()
            if self.transacted and self._tx is not None:
                with self._ack_lock:
                    items, self._unacked = self._unacked, []
                self._return_to_broker(items, rollback_tx=True)
            for consumer in list(self._consumers.values()):
                self._close_consumer(consumer)
        finally:
            self._closed = True
            self._connection._session_closed(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Session {self._MODE_NAMES[self.ack_mode]}{' closed' if self._closed else ''}>"
