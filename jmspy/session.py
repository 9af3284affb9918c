"""Sessions: the unit of acknowledgement, transactions and listener threading.

JMS makes a session single-threaded: its listeners run one at a time, in order, on one
thread of the session's own (jmspy/session_dispatch.py), never the transport's. What each
acknowledgement mode does is one strategy object per session (jmspy/acknowledgement.py),
chosen here when the session is made; the session keeps what every mode shares: its
consumers and producers, handing messages back to the broker, and closing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, cast

from . import api_twins, twins
from .acknowledgement import (
    AUTO_ACK_BATCH,
    AckMode,
    AckModes,
    Acknowledgement,
    Delivered,
    IndividualAcknowledge,
    new_acknowledgement,
)
from .consumer import MessageConsumer, QueueBrowser, check_selector
from .consumer_core import call_watchers
from .destinations import (
    Destination,
    Queue,
    TemporaryQueue,
    TemporaryTopic,
    Topic,
    parse_options,
)
from .errors import (
    IllegalStateException,
    InvalidDestinationException,
    JMSException,
    UnsupportedFeatureException,
)
from .logs import client_logger
from .message import Message
from .producer import MessageProducer
from .session_dispatch import SessionDispatcher
from .telemetry import TracedProducer
from .transport import ConsumerSpec

if TYPE_CHECKING:
    from .session_connection import SessionConnection

__all__ = ["AUTO_ACK_BATCH", "Session"]

log = client_logger("session")

# The message constructors, through the message_new twin (compiled: no __init__ frames;
# jmspy/_pure/message_new.py), bound once.
_new_message = api_twins.message_new.new_message
_new_text_message = api_twins.message_new.new_text_message
_new_bytes_message = api_twins.message_new.new_bytes_message
_new_map_message = api_twins.message_new.new_map_message
#: The Session attributes that are those constructors.
_MESSAGE_CONSTRUCTORS = ("create_message", "create_text_message", "create_bytes_message",
                         "create_map_message")


class Session(SessionDispatcher, AckModes):
    """Creates producers, consumers and messages; owns acknowledgement and transactions.

    The listener dispatcher thread is the :class:`SessionDispatcher` half
    (jmspy/session_dispatch.py)."""

    def __init__(self, connection: SessionConnection, transacted: bool, ack_mode: int
                 ) -> None:
        try:
            mode = AckMode(ack_mode)
        except ValueError:
            raise JMSException(
                f"unknown acknowledge mode {ack_mode!r}; use one of "
                + ", ".join(f"Session.{m.name}" for m in AckMode)
            ) from None
        if transacted:
            mode = AckMode.SESSION_TRANSACTED
        self._connection = connection
        self._transport = connection._transport
        self.transacted = mode is AckMode.SESSION_TRANSACTED
        self.ack_mode = mode
        #: closing, closed: a record of C flags when compiled, which the per-message
        #: loops (listener dispatch, send) read without a lookup
        self._life = twins.lifecycle.SessionLife()
        self._connection_life = connection._life  # read by _ending()
        self._consumers: dict[int, MessageConsumer] = {}
        self._producers: list[MessageProducer] = []
        self._init_dispatcher()  # the listener thread, started by the first listener
        #: What this session's acknowledgement mode does (jmspy/acknowledgement.py).
        self.acknowledgement: Acknowledgement = new_acknowledgement(
            self, mode,
            auto_batch=(
                AUTO_ACK_BATCH if self._transport.in_process else 1
            ),
            dups_batch=connection._properties["dupsOkBatchSize"],
        )
        if connection._telemetry is not None:
            self.acknowledgement.wrap_acknowledger(connection._telemetry.settled_by_message)

    # -- factories --------------------------------------------------------------------
    def create_queue(self, name: str, *, options: Mapping[str, object] | None = None) -> Queue:
        """The queue ``name``. Destination options (a broker's queue arguments or consumer
        settings, docs/destination-options.md) come after a ``?`` in ActiveMQ's syntax,
        ``"orders?x-queue-type=quorum&x-max-length=1000"``, or as ``options={...}``; they
        are checked against the broker now, so one it cannot carry fails here."""
        self._check_open()
        queue = Queue(*parse_options("queue", name, options)) if options else Queue(name)
        if queue.options:
            self._declare(queue)
        return queue

    def create_topic(self, name: str, *, options: Mapping[str, object] | None = None) -> Topic:
        """The topic ``name``; options as for :meth:`create_queue` (consumer settings)."""
        self._check_open()
        topic = Topic(*parse_options("topic", name, options)) if options else Topic(name)
        if topic.options:
            self._declare(topic)
        return topic

    def _declare(self, destination: Destination) -> None:
        """Have the transport check (and, where the broker takes them from the client,
        apply) ``destination``'s options; a transport that knows none refuses them all."""
        self._check_open()
        declare = getattr(self._transport, "declare_destination", None)
        if declare is None:
            raise UnsupportedFeatureException(
                f"the {self._transport.scheme}:// transport takes no destination options; "
                f"{destination} has {', '.join(destination.options)}: leave them out")
        declare(destination)

    def create_temporary_queue(self) -> TemporaryQueue:
        """A queue that lives as long as this session's connection (the broker's own
        temporary queue; only this connection may consume from it). A transport whose
        protocol has none (mqtt://) raises UnsupportedFeatureException."""
        self._check_open()
        return TemporaryQueue(self._transport.create_temporary_queue(), self._connection)

    def create_temporary_topic(self) -> TemporaryTopic:
        """A topic that lives as long as this session's connection; only this connection
        may subscribe to it, and ``delete()`` ends it early (refused while this connection
        still has a consumer on it).

        The same on every transport (vm://, stomp://, mqtt://), because a topic keeps no
        messages of its own: it is a topic with a unique name, ``temp-topic.<hex>``, that
        this connection made and keeps the rules for (see docs/api-guide.md)."""
        self._check_open()
        return self._connection._create_temporary_topic()

    # The message constructors themselves (the message_new twin, bound above), not
    # methods that call them: they need nothing of an open session, and a method would be
    # one more Python frame in every send (measured: 180 ns -> 400 ns per message, against
    # some 4.5 us for a whole vm:// send). A closed session must refuse them all the same
    # (IllegalStateException, as JMS says), so closing shadows them on the instance with
    # one that raises (_refuse_new_messages): an open session pays nothing for the check.
    # ``create_message(properties=None)``, ``create_text_message(text=None,
    # properties=None)``, ``create_bytes_message(data=None, properties=None)``,
    # ``create_map_message(values=None, properties=None)``.
    create_message = staticmethod(_new_message)
    create_text_message = staticmethod(_new_text_message)
    create_bytes_message = staticmethod(_new_bytes_message)
    create_map_message = staticmethod(_new_map_message)

    def _refuse_new_messages(self) -> None:
        """From the start of a close on: every create_*_message raises, naming what is
        closed (this session, or the connection under it)."""

        def refuse(*args: object, **kwargs: object) -> Message:
            self._check_open()  # raises: the session is closing or closed
            raise IllegalStateException("the session is closed")  # pragma: no cover

        for name in _MESSAGE_CONSTRUCTORS:
            vars(self)[name] = refuse

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
        if isinstance(destination, TemporaryTopic):
            self._connection._check_temporary_topic(destination, consuming=False)
        if destination is not None and getattr(destination, "options", None):
            self._declare(destination)
        tel = self._connection._telemetry
        producer = (MessageProducer(self, destination) if tel is None
                    else TracedProducer(self, destination, tel))
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
        if isinstance(destination, TemporaryTopic):
            self._connection._check_temporary_topic(destination, consuming=True)
        if destination.options:
            self._declare(destination)
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
            auto_ack=self.acknowledgement.broker_forgets,
            flow_limit=limit,
            flow_threshold=threshold,
        )
        remote = self._transport.create_consumer(spec)
        consumer = MessageConsumer(
            self, consumer_id, destination, selector, limit, threshold,
            remote.destination_flow_limit,
        )
        log.debug("consumer %d on %s: subscribed (flow limit %d, threshold %d%%%s)",
                  consumer_id, destination, limit, threshold,
                  f", selector {selector!r}" if selector else "")
        tel = conn._telemetry
        if tel is not None:
            consumer._telemetry = tel
            consumer._telemetry_group = subscription if (durable or shared) else None
            tel.add_consumer(consumer)
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
        if self.transacted:
            self._connection._drain_async_sends(self)
        tel = self._connection._telemetry
        if tel is None:
            self.acknowledgement.commit()
            return
        with tel.settle("commit", self._settled_destinations()):
            self.acknowledgement.commit()

    def rollback(self) -> None:
        """Redeliver what was received and discard what was sent in this transaction."""
        self._check_open()
        if self.transacted:
            self._connection._drain_async_sends(self)
        self.acknowledgement.rollback()

    def recover(self) -> None:
        """Stop and restart delivery from the oldest unacknowledged message."""
        self._check_open()
        self.acknowledgement.recover()

    def acknowledge(self) -> None:
        """Acknowledge every message this session delivered (CLIENT_ACKNOWLEDGE)."""
        tel = self._connection._telemetry
        if tel is None:
            self.acknowledgement.acknowledge()  # (which checks that the session is open)
            return
        with tel.settle("ack", self._settled_destinations()):
            self.acknowledgement.acknowledge()

    def _settled_destinations(self) -> list[Destination]:
        """The destinations an acknowledge or commit settles (its consumers')."""
        return [c.destination for c in self._consumers.values()]

    def acknowledge_messages(self, messages: Iterable[Message]) -> None:
        """INDIVIDUAL_ACKNOWLEDGE: acknowledge these messages, and only them, in one call
        (one write for their ACK frames): what ``message.acknowledge()`` on each does, for
        a batch (a Spark micro-batch at its commit)."""
        self._check_open()
        ack = self.acknowledgement
        if not isinstance(ack, IndividualAcknowledge):
            raise IllegalStateException(
                "acknowledge_messages() needs an INDIVIDUAL_ACKNOWLEDGE session; in "
                "CLIENT_ACKNOWLEDGE use session.acknowledge()")
        ack.acknowledge_messages(messages)

    def lend_messages(self, messages: Iterable[Message], token: str,
                      ttl_ms: int | None = None) -> None:
        """INDIVIDUAL_ACKNOWLEDGE, jmspy broker only: lend these messages to the reading
        lease ``token`` instead of acknowledging them. For this session they are settled
        (as by an acknowledgement), but the broker keeps them, counted as in delivery,
        until any connection settles the token (:meth:`Connection.settle_leases`: they
        are consumed) or releases it, or ``ttl_ms`` passes (the broker's default, ten
        minutes, when None): then they are redelivered, marked. How Spark's executors
        read a micro-batch that only the driver commits (docs/spark.md)."""
        self._check_open()
        self._connection._require_leases()
        ack = self.acknowledgement
        if not isinstance(ack, IndividualAcknowledge):
            raise IllegalStateException(
                "lend_messages() needs an INDIVIDUAL_ACKNOWLEDGE session")
        ack.lend_messages(messages, token, ttl_ms)

    def _connection_interrupted(self) -> None:
        """Drop the ack bookkeeping of the dropped connection (see Connection)."""
        self.acknowledgement.connection_interrupted()
        for consumer in list(self._consumers.values()):
            consumer._interrupted()

    def _connection_resumed(self) -> None:
        """A transacted session needs a transaction on the new connection; commit()
        still fails because the old one is gone."""
        if not self._life.closed and not self._life.closing:
            self.acknowledgement.connection_resumed()

    def _in_listener(self) -> bool:
        return self._on_dispatcher_thread() and self._current is not None

    def _pause(self, consumer: MessageConsumer) -> None:
        """Take back the consumer's unused credit so nothing new arrives while we hand
        messages back; otherwise the broker would re-dispatch each returned message to
        it at once, out of order and counted as redelivered."""
        returned = self._transport.revoke_credit(consumer.consumer_id)
        with consumer._lock:
            consumer._buffer.revoked(returned)

    def _return_to_broker(self, items: list[Delivered], *, rollback: str | None) -> None:
        """Give back consumed-but-unacknowledged messages and everything prefetched.

        Prefetched messages are cancelled first and the app-seen ones after: the broker
        puts cancelled messages back at the head, so this restores the original order.
        ``rollback`` names a transaction to roll back before the app-seen ones return.
        """
        connection = self._connection
        drops = connection.drops  # before the checks: see Connection.drops
        # deliveries of a connection that dropped were forgotten by the drop, and the
        # broker redelivers them by itself: neither counted back nor cancelled here
        items = [item for item in items if not connection._dead(item[1])]
        taken: dict[MessageConsumer, int] = {}
        for consumer, _ in items:
            taken[consumer] = taken.get(consumer, 0) + 1
        consumers = list(self._consumers.values())
        for consumer in consumers:
            self._pause(consumer)
        for consumer in consumers:
            drained = consumer._returned(taken.get(consumer, 0), drops)
            if drained:
                self._transport.cancel([m._delivery_tag for m in drained], redelivered=False)
        if rollback is not None:
            try:
                self._transport.rollback(rollback)
            except IllegalStateException:  # already dropped: a broker refusing a commit
                pass  # (a full store, say) rolls it back itself; the consumers resume
        tags = [tag for consumer, tag in items if not consumer.closed]
        if tags:
            self._transport.cancel(tags, redelivered=True)
        for consumer in consumers:
            self._resume(consumer)

    def _resume(self, consumer: MessageConsumer) -> None:
        self._connection._flow.top_up(consumer)
        if consumer._buffer.limit == 0 and consumer._listener is not None:
            consumer._pull_one()

    # -- per-message hooks (called on the thread that hands the message to the app) ----
    def _delivered_to_app(self, consumer: MessageConsumer, message: Message) -> None:
        self.acknowledgement.delivered(consumer, message)

    def _processing_done(self, consumer: MessageConsumer, message: Message, ok: bool) -> None:
        self.acknowledgement.processed(consumer, message, ok)

    def _redeliver(self, consumer: MessageConsumer, message: Message) -> None:
        """AUTO/DUPS_OK: a listener failed (or called recover()): deliver it again."""
        drops = self._connection.drops
        if self._connection._dead(message._delivery_tag):
            return  # its connection dropped: the broker redelivers it by itself
        self._pause(consumer)
        drained = consumer._returned(1, drops)
        if drained:
            self._transport.cancel([m._delivery_tag for m in drained], redelivered=False)
        self._transport.cancel([message._delivery_tag], redelivered=True)
        self._resume(consumer)

    # -- closing ------------------------------------------------------------------------
    def _check_open(self) -> None:
        """Raise IllegalStateException naming what is closed (this session, or the
        connection under it) if either is."""
        self._connection._check_open()
        if self._life.closed or self._life.closing:
            raise IllegalStateException(
                "the session is closed; create a new one with connection.create_session()")

    def _ending(self) -> bool:
        """Whether this session or its connection is closed or closing."""
        return (self._life.closed or self._life.closing or self._connection_life.closing
                or self._connection_life.closed)

    def _close_consumer(self, consumer: MessageConsumer) -> None:
        if consumer._closed:
            return
        if self._on_dispatcher_thread() and self._current is consumer:
            with consumer._lock:
                consumer._listener = None  # no further messages for it
            self._deferred.append(consumer)
            return
        forgets = self.acknowledgement.broker_forgets
        if not forgets:
            self._pause(consumer)
        with consumer._lock:
            consumer._closed = True
            consumer._listener = None
            drained = cast(list[Message], consumer._buffer.drain())
            watchers = consumer._wake()
        call_watchers(watchers)
        self._consumers.pop(consumer.consumer_id, None)
        processed = self.acknowledgement.forget(consumer)
        if processed:
            self._transport.ack(processed)
        if drained and not forgets:
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
        if self._life.closed or self._life.closing:
            return
        if self._on_dispatcher_thread():
            self._life.closing = True
            self._refuse_new_messages()
            self._deferred.append(None)
            return
        self._do_close()

    def _do_close(self) -> None:
        if self._life.closed:
            return
        self._life.closing = True
        self._refuse_new_messages()
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
            self.acknowledgement.close()
            for consumer in list(self._consumers.values()):
                self._close_consumer(consumer)
        finally:
            self._life.closed = True
            self._connection._session_closed(self)

    @property
    def closed(self) -> bool:
        return self._life.closed

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Session {self.ack_mode.name}{' closed' if self._life.closed else ''}>"
