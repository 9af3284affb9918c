"""Connections (their factory is :mod:`jmspy.factory`).

A connection owns one transport, routes the transport's deliveries to consumers, holds
the connection-wide flow cap, and runs the two kinds of user callback that must never run
on a transport's I/O thread: the exception listener and async-send completion listeners.
Both run on one notifier thread per connection, started on first use.
"""

from __future__ import annotations

import itertools
import queue
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from . import api_twins, telemetry, twins
from .capabilities import Feature
from .destinations import TEMP_TOPIC_PREFIX, Destination, TemporaryQueue, TemporaryTopic
from .errors import (
    IllegalStateException,
    InvalidClientIDException,
    InvalidConfigurationException,
    InvalidDestinationException,
    JMSException,
    UnsupportedFeatureException,
)
from .flow import ConnectionFlow
from .logs import client_logger
from .message import Message
from .transport import Credentials, Transport

if TYPE_CHECKING:
    from .completion import CompletionCallback
    from .consumer import MessageConsumer
    from .session import Session

__all__ = ["Connection", "ExceptionCallback", "ExceptionListener"]

log = client_logger("connection")
_instances = itertools.count(1)
#: Error codes of a connection that dropped: the transport reports those itself.
_LOSS_CODES = frozenset({"CONNECTION_INTERRUPTED", "CONNECTION_LOST"})

@runtime_checkable
class ExceptionListener(Protocol):
    def on_exception(self, exception: JMSException) -> None: ...


ExceptionCallback = ExceptionListener | Callable[[JMSException], Any]


class Connection:
    """A live connection to a broker; create sessions from it, then ``start()``."""

    def __init__(
        self,
        transport: Transport,
        properties: dict[str, Any],
        *,
        user: str | None = None,
        password: str | None = None,
    ) -> None:
        self._transport = transport
        #: vm://'s send that completes in the call where it can (see _send_async)
        self._send_inline: Callable[[Message, str | None, Callable[[Exception | None], None]],
                                    bool] | None = getattr(transport, "send_inline", None)
        self._properties = properties
        self._instance = next(_instances)
        #: JMSMessageIDs, ``ID:<16 hex of a uuid4>-<instance>-<n>``: unique across
        #: connections and processes. A bound method of the twin (a C call when compiled),
        #: called once per message sent.
        self._next_message_id: Callable[[], str] = api_twins.producer_core.MessageIds(
            f"ID:{uuid.uuid4().hex[:16]}-{self._instance}-").next_id
        self._consumer_ids = itertools.count(1)
        #: started, closing, closed: a record of C flags when compiled, which the
        #: per-message loops (listener dispatch, send) read without a lookup
        self._life = twins.lifecycle.ConnectionLife()
        self._close_lock = threading.Lock()
        self._close_deferred_to: Session | None = None
        self._sessions: list[Session] = []
        self._consumers: dict[int, MessageConsumer] = {}
        self._exception_listener: ExceptionCallback | None = None
        self._notifier: _Notifier | None = None
        self._flow = ConnectionFlow(
            transport,
            bool(properties["imqConnectionFlowLimitEnabled"]),
            int(properties["imqConnectionFlowLimit"]),
        )
        # Delivery tags up to _dead_tag_floor belong to a connection that dropped: the
        # broker redelivers those messages, so acknowledging them is a no-op.
        self._last_tag = 0
        self._dead_tag_floor = 0
        # How many times the connection dropped: a count of consumed or returned messages
        # decided before a drop (read before it, applied after it) is stale, because the
        # drop already forgot every unconsumed delivery (MessageConsumer checks it).
        self._drops = 0
        #: the CONNECTION_LOST error once the transport gave up: blocked receive() calls
        #: raise it instead of waiting for messages that can no longer come
        self._lost: JMSException | None = None
        #: names of the temporary topics this connection made, and those since deleted
        self._temporary_topics: set[str] = set()
        self._deleted_topics: set[str] = set()
        self.client_id: str | None = properties["clientID"]
        #: OpenTelemetry spans and metrics (jmspy/telemetry.py), None unless configured:
        #: the one check the send, receive, listener and settle paths make
        self._telemetry: telemetry.Telemetry | None = telemetry.for_connection(transport)
        transport.open(self, Credentials(self.client_id, user, password))
        if self._telemetry is not None:
            self._telemetry.connected()
        log.debug("connection %d: connected to %s (%s, connection flow limit %s)",
                  self._instance, self.where, type(transport).__name__,
                  self._flow.limit if self._flow.enabled else "off")

    # -- public API -------------------------------------------------------------------
    def set_client_id(self, client_id: str) -> None:
        """Client ids are fixed when the connection opens; this explains how to set one."""
        if client_id == self.client_id:
            return
        raise InvalidClientIDException(
            "the client id is fixed when the connection opens; pass it as "
            "ConnectionFactory(url, clientID=...) or create_connection(client_id=...)"
        )

    def set_exception_listener(self, listener: ExceptionCallback | None) -> None:
        """Hear about asynchronous problems (a listener raised, the connection failed)."""
        self._exception_listener = listener

    @property
    def exception_listener(self) -> ExceptionCallback | None:
        return self._exception_listener

    def create_session(
        self, transacted: bool = False, ack_mode: int = 1
    ) -> Session:
        """A session; ``ack_mode`` is a Session.*_ACKNOWLEDGE constant."""
        from .session import Session

        self._check_open()
        session = Session(self, transacted, ack_mode)
        self._sessions.append(session)
        return session

    def start(self) -> None:
        """Start (or resume) delivery to receive() callers and listeners."""
        self._check_open()
        self._life.started = True
        self._wake_all()

    def stop(self) -> None:
        """Pause delivery; messages stay buffered (flow limits still bound them)."""
        self._check_open()
        if any(s._on_dispatcher_thread() for s in self._sessions):
            raise IllegalStateException(
                "stop() called from a message listener of this connection would wait for "
                "itself; call it from another thread"
            )
        self._life.started = False

    @property
    def started(self) -> bool:
        return self._life.started

    @property
    def where(self) -> str:
        """The URL of the broker this connection is on now (with an address list, the
        one it connected or last reconnected to), e.g. ``stomp://h2:61613``."""
        where = self._transport.where
        return where if "://" in where else f"{self._transport.scheme}://{where}"

    def destination_stats(self, destination: Destination) -> dict[str, Any]:
        """The broker's counters for a destination (messageCount, deliveringCount...)."""
        self._check_open()
        return self._transport.destination_stats(destination)

    def settle_leases(self, tokens: Iterable[str]) -> int:
        """Consume what the reading leases ``tokens`` hold (``Session.lend_messages``,
        from any connection of the broker); returns how many messages that was. Tokens
        that hold nothing (never lent, settled already, run out) count nothing."""
        return self._leases(tokens, release=False)

    def release_leases(self, tokens: Iterable[str]) -> int:
        """Give what the reading leases ``tokens`` hold back to their queues, to be
        redelivered (marked); returns how many messages that was."""
        return self._leases(tokens, release=True)

    def _leases(self, tokens: Iterable[str], *, release: bool) -> int:
        self._check_open()
        self._require_leases()
        names = list(tokens)
        if isinstance(tokens, str) or not all(isinstance(t, str) and t for t in names):
            raise InvalidConfigurationException(
                f"lease tokens must be a list of non-empty strings, got {tokens!r}")
        return self._transport.settle_leases(names, release=release)

    def _require_leases(self) -> None:
        """Refuse, before any effect, where the broker has no reading leases: with the
        capability matrix's refusal where the transport has one (``require``)."""
        transport = self._transport
        if Feature.READING_LEASES not in transport.capabilities:
            require = getattr(transport, "require", None)
            if require is not None:
                require(Feature.READING_LEASES)
            raise UnsupportedFeatureException(
                f"reading leases need jmspy broker (vm://, or stomp:// to jmspy broker), and "
                f"{self.where} is not one; acknowledge messages on the connection that "
                "received them instead")

    def flow_stats(self) -> dict[str, Any]:
        """Connection-wide flow control: the cap and what is buffered against it."""
        return {
            "enabled": self._flow.enabled,
            "limit": self._flow.limit,
            "buffered": self._flow.buffered_total(),
        }

    def close(self) -> None:
        """Close sessions (rolling back open transactions) and the transport.

        Safe from any thread. From inside a message listener the close finishes once that
        listener returns (its message is acknowledged first).
        """
        with self._close_lock:
            if self._life.closed or self._life.closing:
                return
            self._life.closing = True
        current = next((s for s in self._sessions if s._on_dispatcher_thread()), None)
        for session in list(self._sessions):
            if session is not current:
                session.close()
        if current is not None:
            self._close_deferred_to = current
            current.close()
            return
        self._finish_close()

    @property
    def closed(self) -> bool:
        return self._life.closed

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------
    def _finish_close(self) -> None:
        for session in list(self._sessions):
            session._do_close()
        try:
            self._transport.close()
        finally:
            self._life.closed = True
            self._life.started = False
            if self._notifier is not None:
                self._notifier.stop()

    def _check_open(self) -> None:
        if self._life.closed or self._life.closing:
            raise IllegalStateException(
                "the connection is closed; create a new one with "
                "factory.create_connection()")

    def _wake_all(self) -> None:
        for consumer in list(self._consumers.values()):
            consumer._wake_waiters()
        for session in list(self._sessions):
            session._wake()

    def _next_consumer_id(self) -> int:
        return next(self._consumer_ids)

    def _register_consumer(self, consumer: MessageConsumer) -> None:
        self._consumers[consumer.consumer_id] = consumer

    def _unregister_consumer(self, consumer: MessageConsumer) -> None:
        self._consumers.pop(consumer.consumer_id, None)

    def _session_closed(self, session: Session) -> None:
        if session in self._sessions:
            self._sessions.remove(session)

    def _delete_temporary_queue(self, queue: TemporaryQueue) -> None:
        self._check_open()
        self._transport.delete_temporary_queue(queue.name)

    # Temporary topics: topics keep nothing without a subscriber, so one is a topic with
    # a name no one else has, whose JMS rules (only its connection subscribes, none
    # after delete) this connection keeps. The same on every transport.
    def _create_temporary_topic(self) -> TemporaryTopic:
        self._check_open()
        topic = TemporaryTopic(f"{TEMP_TOPIC_PREFIX}{uuid.uuid4().hex}", self)
        self._temporary_topics.add(topic.name)
        return topic

    def _check_temporary_topic(self, topic: TemporaryTopic, *, consuming: bool) -> None:
        """Refuse a deleted temporary topic, and a subscription to another connection's."""
        if topic.name in self._deleted_topics:
            raise InvalidDestinationException(
                f"{topic} was deleted; create a new one with session.create_temporary_topic()")
        if consuming and topic.name not in self._temporary_topics:
            raise InvalidDestinationException(
                f"{topic} is a temporary topic of another connection; only the connection "
                "that created it may subscribe to it (sending to it is allowed)")

    def _delete_temporary_topic(self, topic: TemporaryTopic) -> None:
        self._check_open()
        if topic.name not in self._temporary_topics:
            raise IllegalStateException(
                f"{topic} was created by another connection; only that one can delete it")
        if any(c.destination == topic for c in list(self._consumers.values())):
            raise IllegalStateException(
                f"{topic} still has a consumer on this connection; close it before "
                "delete()")
        self._temporary_topics.discard(topic.name)
        self._deleted_topics.add(topic.name)

    # TransportListener ----------------------------------------------------------------
    def on_delivery(
        self, consumer_id: int, delivery_tag: int, message: Message, delivery_count: int
    ) -> None:
        consumer = self._consumers.get(consumer_id)
        if consumer is None:
            return  # closed meanwhile; the broker redelivers what it never got acked
        if delivery_tag > self._last_tag:
            self._last_tag = delivery_tag
        message._delivery_tag = delivery_tag
        message.delivery_count = delivery_count
        message.redelivered = delivery_count > 1
        consumer._deliver(message)

    def on_deliveries(self, consumer_id: int, first_tag: int, messages: list[Message]) -> None:
        """A run of deliveries to one consumer (tags ``first_tag`` on), already carrying
        their tags and delivery counts (the in-process transport builds them so).

        One call per run rather than per message: on ``vm://`` the broker hands deliveries
        over on the producer's thread, so this path is paid by every send."""
        consumer = self._consumers.get(consumer_id)
        if consumer is None:
            return  # closed meanwhile; the broker redelivers what it never got acked
        last = first_tag + len(messages) - 1
        if last > self._last_tag:
            self._last_tag = last
        consumer._deliver_many(messages)

    def credit(self, consumer_id: int) -> int:
        """The consumer's unused credit, as its flow accounting (its prefetch buffer, the
        one owner of the window) counts it: what a stashing transport may hand over."""
        consumer = self._consumers.get(consumer_id)
        if consumer is None or consumer._closed:
            return 0
        return consumer._buffer.outstanding

    def on_transport_error(self, error: JMSException) -> None:
        self._report(error)

    def on_connection_interrupted(self, error: JMSException) -> None:
        """Forget every delivery of the dropped connection, then tell the user.

        Prefetched and taken-but-unacknowledged messages are dropped rather than kept:
        their delivery tags died with the connection and the broker redelivers them
        (marked redelivered), so keeping them would hand the application duplicates it
        could not even acknowledge. Flow counters restart from zero so that the resumed
        connection grants a whole window again. Idempotent (a transport that gives up
        after reconnecting for a while calls this again with CONNECTION_LOST).
        """
        log.debug("connection %d: %s: %s", self._instance, error.error_code, error)
        self._dead_tag_floor = max(self._dead_tag_floor, self._last_tag)
        self._drops += 1  # both before any consumer forgets its deliveries (below)
        if error.broker is None:
            error.broker = self.where  # (the transport still names the broker it lost)
        if error.error_code == "CONNECTION_LOST":
            self._lost = error  # before the wake-up below, which receive() then sees
        for session in list(self._sessions):
            session._connection_interrupted()
        self._report(error)

    def on_connection_resumed(self) -> None:
        """Re-grant each consumer's window (the transport has re-subscribed them)."""
        for session in list(self._sessions):
            try:
                session._connection_resumed()
            except JMSException as exc:
                self._report(exc)
        for consumer in list(self._consumers.values()):
            try:
                if consumer._buffer.limit > 0:
                    self._flow.top_up(consumer)
                elif consumer._listener is not None:
                    consumer._pull_one()
            except JMSException as exc:
                self._report(exc)
        where = self.where
        log.debug("connection %d: reconnected to %s; %d consumer(s) subscribed again",
                  self._instance, where, len(self._consumers))
        resumed = JMSException(
            f"reconnected to {where}; subscriptions were re-created and "
            "unacknowledged messages will be redelivered",
            error_code="CONNECTION_RESUMED",
        )
        resumed.broker = where
        self._report(resumed)

    def _io_failed(self, error: Exception, doing: str) -> None:
        """A call into the transport made on a session's dispatcher thread (``doing``)
        raised: the thread lives on, and the error is a connection loss.

        A JMSException saying the connection is down is already the transport's news (it
        reports CONNECTION_INTERRUPTED or CONNECTION_LOST itself, and the acknowledgements
        that failed come back from the broker marked redelivered); any other JMSException
        goes to the exception listener. Anything else -- an OSError from a socket, a
        protocol library's own exception -- escaped a transport that should have turned it
        into a JMSException: the transport's ``io_failed`` (when it has one) treats the
        connection as lost, so its reconnect machinery runs, and the listener hears it.
        """
        if isinstance(error, JMSException):
            if error.error_code not in _LOSS_CODES:
                self._report(error)
            return
        failed: Callable[[BaseException], None] | None = getattr(
            self._transport, "io_failed", None)
        handled = False
        if failed is not None:
            try:
                failed(error)
                handled = True
            except Exception:  # pragma: no cover - a transport's own bug, logged below

                log.exception("transport io_failed raised")
        if not handled:
            self._report(JMSException(
                f"{doing} failed on the connection to {self._transport.where} "
                f"({type(error).__name__}: {error}); this transport cannot treat it as a "
                "lost connection (it has no io_failed), so nothing reconnects: if calls "
                "keep failing, create a new connection", error_code="IO_FAILED"),
                cause=error)

    @property
    def drops(self) -> int:
        """How many times this connection dropped (and was resumed or lost) so far."""
        return self._drops

    @property
    def dead_tag_floor(self) -> int:
        """Delivery tags at or below this came over a connection that has dropped."""
        return self._dead_tag_floor

    def _dead(self, delivery_tag: int) -> bool:
        """Whether a delivery came over a connection that has since dropped."""
        floor = self._dead_tag_floor
        return floor > 0 and delivery_tag <= floor

    # user callbacks off the I/O thread --------------------------------------------------
    def _get_notifier(self) -> _Notifier:
        with self._close_lock:
            if self._notifier is None:
                self._notifier = _Notifier(self._instance)
            return self._notifier

    def _report(self, error: JMSException, cause: BaseException | None = None) -> None:
        if cause is not None:
            error.__cause__ = cause
        listener = self._exception_listener
        if listener is None:
            return
        callback: Callable[[JMSException], Any] = (
            listener.on_exception if isinstance(listener, ExceptionListener) else listener
        )
        self._get_notifier().submit(lambda: callback(error))

    def _send_async(
        self,
        session: object,
        message: Message,
        tx: str | None,
        listener: CompletionCallback,
    ) -> None:
        def complete(error: Exception | None) -> None:
            on_completion = getattr(listener, "on_completion", None)
            if on_completion is not None:
                if error is None:
                    on_completion(message)
                else:
                    listener.on_exception(message, error)  # type: ignore[union-attr]
            else:
                listener(message, error)  # type: ignore[operator]

        send_async = self._transport.send_async
        if getattr(listener, "runs_on_any_thread", False):
            # A listener that says it only hands the outcome over (jmspy.aio's: one
            # call_soon_threadsafe) is called on the transport's thread, in send order,
            # without the notifier's hop; its ``outcome(error)``, where it has one, is
            # called directly.
            outcome = getattr(listener, "outcome", complete)
            send_inline = self._send_inline
            if send_inline is not None and send_inline(message, tx, outcome):
                return  # vm://: done now, or by the broker when it lets a parked send in
            if send_async is not None:
                try:
                    send_async(message, tx, outcome)
                except Exception as exc:
                    outcome(exc)
                return
        if send_async is not None:
            # The transport keeps several sends in flight and calls ``done`` in send order
            # (on its own thread): the listener still runs on the notifier, counted from
            # now so that closing the session waits for it.
            notifier = self._get_notifier()
            notifier.expect(session)

            def done(error: Exception | None) -> None:
                notifier.deliver(lambda: complete(error), session)

            try:
                send_async(message, tx, done)
            except Exception as exc:
                done(exc)
            return

        def run() -> None:
            error: Exception | None = None
            try:
                self._transport.send(message, tx)
            except Exception as exc:
                error = exc
            complete(error)

        self._get_notifier().submit(run, session)

    def _drain_async_sends(self, session: object) -> None:
        notifier = self._notifier
        if notifier is not None and not notifier.on_thread():
            notifier.wait_for(session)


class _Notifier:
    """One thread per connection running user callbacks in submission order."""

    def __init__(self, instance: int) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], None], object] | None] = (
            queue.SimpleQueue()
        )
        self._pending: dict[int, int] = {}
        self._cond = threading.Condition()
        self._thread = threading.Thread(
            target=self._run, name=f"jmspy-notifier-{instance}", daemon=True
        )
        self._thread.start()

    def submit(self, fn: Callable[[], None], owner: object = None) -> None:
        self.expect(owner)
        self._queue.put((fn, owner))

    def expect(self, owner: object) -> None:
        """Count a callback for ``owner`` that :meth:`deliver` will queue later."""
        with self._cond:
            key = id(owner)
            self._pending[key] = self._pending.get(key, 0) + 1

    def deliver(self, fn: Callable[[], None], owner: object) -> None:
        """Queue a callback counted by :meth:`expect` (from any thread)."""
        self._queue.put((fn, owner))

    def wait_for(self, owner: object, timeout: float = 30.0) -> None:
        """Block until every callback submitted for ``owner`` has run."""
        with self._cond:
            self._cond.wait_for(lambda: not self._pending.get(id(owner)), timeout)

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def stop(self) -> None:
        self._queue.put(None)
        if not self.on_thread():
            self._thread.join(5.0)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, owner = item
            try:
                fn()
            except Exception:  # a user callback failed: nothing to report it to

                log.exception("user callback raised")
            finally:
                with self._cond:
                    key = id(owner)
                    left = self._pending[key] - 1
                    if left:
                        self._pending[key] = left
                    else:  # what wait_for waits for: no wake-up per callback before it
                        del self._pending[key]
                        self._cond.notify_all()
