"""Message consumers (``receive`` loops and listeners) and queue browsers.

A consumer's messages arrive from the transport into its prefetch buffer on whatever
thread the transport uses; they reach user code only on the caller's thread
(``receive``) or on its session's dispatcher thread (listeners), never on the transport's.
Acknowledgement bookkeeping lives in the session, because JMS acknowledgement is
per session (CLIENT_ACKNOWLEDGE acknowledges everything the session delivered).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast, runtime_checkable

from .consumer_core import ConsumerCore, call_watchers
from .destinations import Destination, Queue
from .errors import IllegalStateException, JMSException, MessageFormatException
from .flow import FlowStats, new_prefetch_buffer
from .message import Message
from .message_body import body_as, check_body_type
from .telemetry import Telemetry, TracedListener

if TYPE_CHECKING:
    from .owners import ConsumerSession, OwnerConnection

__all__ = ["MessageConsumer", "MessageListener", "QueueBrowser"]

T = TypeVar("T")


@runtime_checkable
class MessageListener(Protocol):
    """An object with ``on_message(message)``; a plain callable works too."""

    def on_message(self, message: Message) -> None: ...


ListenerType = MessageListener | Callable[[Message], Any]


def check_selector(selector: str | None) -> str | None:
    """Validate a selector on the client so errors point at the bad token at once."""
    if selector is None or not selector.strip():
        return None
    from .selector import compile_selector

    compile_selector(selector)  # raises InvalidSelectorException pointing at the token
    return selector




class MessageConsumer(ConsumerCore):
    """Receives messages from one destination, synchronously or through a listener.

    Its shared fields and ``_deliver_many`` (the transport's hand-off) are the
    :class:`ConsumerCore` base's (``jmspy/consumer_core.py``); the rest is here."""

    def __init__(
        self,
        session: ConsumerSession[MessageConsumer],
        consumer_id: int,
        destination: Destination,
        selector: str | None,
        client_limit: int,
        threshold: int,
        destination_limit: int | None,
    ) -> None:
        self._session = session
        self.consumer_id = consumer_id
        self.destination = destination
        self.selector = selector
        self._client_limit = client_limit
        self._destination_limit = destination_limit
        if destination_limit is not None and destination_limit < client_limit:
            limit, self._limited_by = destination_limit, "destination"
        else:
            limit, self._limited_by = client_limit, "client"
        if limit == 0:
            self._limited_by = "pull"
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._buffer = new_prefetch_buffer(limit, threshold)
        self._connection_capped = 0
        self._listener: ListenerType | None = None
        self._closed = False
        self._scheduled = False  # guarded by the session's dispatch lock
        self._receiving = 0
        self._watchers = None
        #: set by the session when its connection is instrumented (jmspy/telemetry.py)
        self._telemetry: Telemetry | None = None
        self._telemetry_group: str | None = None

    # -- called by the transport (any thread; must only buffer) -------------------------
    def _deliver(self, message: Message) -> None:
        self._deliver_many([message])

    # _deliver_many(messages), for a run of them, is the ConsumerCore twin's.

    # -- public API -------------------------------------------------------------------
    @property
    def message_listener(self) -> ListenerType | None:
        listener = self._listener
        return listener.listener if isinstance(listener, TracedListener) else listener

    def set_message_listener(self, listener: ListenerType | None) -> None:
        """Deliver messages to ``listener`` on the session's dispatcher thread.

        ``listener`` is a callable taking the message, or an object with ``on_message``.
        ``None`` switches back to ``receive()``.
        """
        self._check_open()
        if listener is not None and not (
            callable(listener) or callable(getattr(listener, "on_message", None))
        ):
            raise IllegalStateException(
                f"message listener {listener!r} is neither callable nor has on_message()"
            )
        with self._lock:
            if self._receiving:
                raise IllegalStateException(
                    "cannot set a message listener while another thread is blocked in "
                    "receive() on this consumer"
                )
            tel = self._telemetry
            self._listener = (listener if tel is None or listener is None
                              else TracedListener(tel, self, listener))
            pending = len(self._buffer) > 0
        if listener is not None:
            self._session._ensure_dispatcher()
            if self._buffer.limit == 0:
                self._pull_one()
            if pending:
                self._session._schedule(self)

    def receive(self, timeout: float | None = None) -> Message | None:
        """The next message, waiting up to ``timeout`` seconds (None: forever).

        Returns None on timeout or when the consumer is closed while waiting.
        """
        message = self._take(timeout)
        if message is not None:
            self._session._processing_done(self, message, ok=True)
        return message

    def receive_body(self, body_type: type[T], timeout: float | None = None) -> T | None:
        """The next message's body as ``body_type`` (JMS 2.0's ``receiveBody``): ``str``
        for a TextMessage, ``bytes`` for a BytesMessage, ``dict`` for a MapMessage,
        ``object`` for any; None on timeout (or for a message without a body).

        A body of another type raises MessageFormatException and the message is not
        acknowledged: in AUTO_ACKNOWLEDGE and DUPS_OK_ACKNOWLEDGE it is delivered again
        (marked redelivered); in CLIENT_ACKNOWLEDGE and transacted sessions it counts as
        delivered, settled by the next acknowledge(), commit(), recover() or rollback()
        (INDIVIDUAL_ACKNOWLEDGE: it returns when the session closes; NO_ACKNOWLEDGE: the
        broker forgot it on delivery).
        """
        check_body_type(body_type)
        message = self._take(timeout)
        if message is None:
            return None
        try:
            body = body_as(message, body_type)
        except MessageFormatException:
            self._session._processing_done(self, message, ok=False)
            raise
        self._session._processing_done(self, message, ok=True)
        return body

    def receive_body_no_wait(self, body_type: type[T]) -> T | None:
        """:meth:`receive_body` without waiting (a body only if a message is ready)."""
        return self.receive_body(body_type, 0.0)

    def _take(self, timeout: float | None) -> Message | None:
        """The next message, handed to the application (its acknowledgement is still to
        be settled by the caller with ``_processing_done``)."""
        self._check_open()
        if self._listener is not None:
            raise IllegalStateException(
                "receive() called on a consumer that has a message listener; a consumer "
                "is either synchronous or asynchronous: set_message_listener(None) first"
            )
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        tel = self._telemetry
        if tel is None:
            message = self._wait_for_message(deadline)
            if message is not None:
                self._session._delivered_to_app(self, message)
            return message
        start_ns, start = time.time_ns(), time.perf_counter()
        message = self._wait_for_message(deadline)
        if message is not None:
            self._session._delivered_to_app(self, message)
            tel.received(self, message, start_ns, start)
        return message

    def messages(self, timeout: float | None = None) -> Iterator[Message]:
        """Iterate over received messages (like nats' ``subscription.messages``).

        Each step is one ``receive(timeout)``, so ``timeout`` is an *idle* limit, not a
        bound on the whole loop: the iteration ends when no message arrives within
        ``timeout`` seconds of asking for the next one (None: wait for ever), and a busy
        consumer iterates for as long as messages keep coming. It also ends, without an
        error, when the consumer, its session or its connection is closed (from any
        thread: a waiting step wakes up and the loop finishes). A connection that is lost
        for good raises its ``JMSException`` (CONNECTION_LOST) instead, so a loop never
        ends silently on a failure. Each message is acknowledged as ``receive`` would
        acknowledge it (per the session's mode)::

            for message in consumer.messages(timeout=5):
                handle(message)
        """
        while not self._ended():
            try:
                message = self.receive(timeout)
            except IllegalStateException:
                if self._ended():  # closed between our check and receive()'s own
                    return
                raise
            if message is None:
                return
            yield message

    def __iter__(self) -> Iterator[Message]:
        """``for message in consumer:`` is ``consumer.messages()``: it waits for each
        message for as long as it takes and ends when the consumer, its session or its
        connection closes (see :meth:`messages`, which also takes an idle timeout)."""
        return self.messages()

    # -- for faces over this consumer (jmspy.aio): waiting apart from taking ---------
    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until :meth:`take_no_wait` would return a message (True), or until this
        consumer, its session or its connection ends or ``timeout`` seconds pass (False).

        It takes nothing: a waiter on another thread (an event loop's) learns that a
        message is ready while the message stays in the prefetch buffer, counted against
        the flow window, until the application's own thread takes it. So a waiter that is
        abandoned (its task cancelled) strands no message. Raises the connection's
        ``JMSException`` once the connection is lost for good, as ``receive()`` does."""
        if self._buffer.limit == 0 and self._listener is None:
            self._pull_one()
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        connection = self._session._connection
        with self._lock:
            self._receiving += 1  # so _deliver_many notifies us
            try:
                while not self._closed and not self._session._ending():
                    if connection.started and len(self._buffer) > 0:
                        return True
                    if not self._wait_turn(connection, deadline):
                        return False
                return False
            finally:
                self._receiving -= 1

    def call_when_ready(self, watcher: Callable[[], None]) -> bool:
        """Have ``watcher()`` called once, when :meth:`take_no_wait` may have a message
        or this consumer, its session or its connection ended or was lost; False, and
        nothing kept, when that is so already (look again now).

        The waiting of an event loop, which has no thread to block in :meth:`wait_ready`:
        the watcher runs on the thread that made it so (the transport's, or a sender's
        over ``vm://``), outside this consumer's lock, so it must be quick and must not
        raise (an event loop's ``call_soon_threadsafe``). A wake-up may find nothing to
        take (another taker was first): the caller looks and, if need be, watches again.
        In pull mode (limit 0) it asks the broker for one message, as ``wait_ready``
        does."""
        if self._buffer.limit == 0 and self._listener is None:
            self._pull_one()
        connection = self._session._connection
        with self._lock:
            if (self._closed or self._session._ending() or connection._lost is not None
                    or (connection.started and len(self._buffer) > 0)):
                return False
            if self._watchers is None:
                self._watchers = [watcher]
            else:
                self._watchers.append(watcher)
            return True

    def _wake_waiters(self) -> None:
        """Something every waiter must look at again happened (the connection started,
        was lost or closes): wake blocked receivers and call the watchers."""
        with self._lock:
            watchers = self._wake()
        call_watchers(watchers)

    def take_no_wait(self) -> Message | None:
        """The next buffered message, handed to the application, or None at once.

        Unlike ``receive_no_wait()`` its acknowledgement is left to :meth:`settle` (an
        async face acknowledges an AUTO_ACKNOWLEDGE message when the next one is asked
        for, or when ``process()`` ends), and in pull mode it asks the broker for nothing
        (:meth:`wait_ready` does). Raises the connection's ``JMSException`` once it is
        lost for good and nothing is buffered."""
        self._check_open()
        if self._listener is not None:
            raise IllegalStateException(
                "take_no_wait() called on a consumer that has a message listener; "
                "set_message_listener(None) first")
        connection = self._session._connection
        with self._lock:
            item = cast(Message | None, self._buffer.pop()) if connection.started else None
        if item is None:
            lost = connection._lost
            if lost is not None:
                raise JMSException(str(lost), error_code=lost.error_code)
            return None
        self._session._delivered_to_app(self, item)
        tel = self._telemetry
        if tel is not None:  # the face's wait is its own: the span starts at the take
            tel.received(self, item, time.time_ns(), time.perf_counter())
        return item

    def settle(self, message: Message, ok: bool = True) -> None:
        """Finish a message :meth:`take_no_wait` handed out, as ``receive()`` finishes
        its own (``ok``) or as a failed listener's (not ``ok``): in AUTO_ACKNOWLEDGE and
        DUPS_OK_ACKNOWLEDGE ``ok`` acknowledges it (and refills credit at the threshold)
        and not ``ok`` has it delivered again, marked redelivered; the other modes settle
        it with ``acknowledge()``, ``commit()``, ``recover()`` or ``rollback()``."""
        self._session._processing_done(self, message, ok)

    def receive_no_wait(self) -> Message | None:
        """A message if one is buffered (or, in pull mode, immediately available)."""
        return self.receive(timeout=0.0)

    def close(self) -> None:
        """Stop the consumer; unconsumed messages go back to the broker for redelivery.

        Safe from any thread, including this consumer's own listener (the message being
        handled is then finished and acknowledged first).
        """
        self._session._close_consumer(self)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def ended(self) -> bool:
        """Whether this consumer, its session or its connection is closed or closing:
        nothing more will be received (a face's loop ends on it, as :meth:`messages`)."""
        return self._ended()

    def flow_stats(self) -> FlowStats:
        """Effective limit, which side set it, and live counters."""
        with self._lock:
            b = self._buffer
            return FlowStats(
                limit=b.limit,
                threshold=b.threshold,
                limited_by=self._limited_by,
                client_limit=self._client_limit,
                destination_limit=self._destination_limit,
                buffered=b.buffered,
                unconsumed=b.unconsumed,
                outstanding_credit=b.outstanding,
                delivered=b.delivered_total,
                consumed=b.consumed_total,
                batches_requested=b.batches,
                pauses=b.pauses,
                connection_capped=self._connection_capped,
            )

    def __enter__(self) -> MessageConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MessageConsumer {self.consumer_id} on {self.destination}>"

    # -- internals --------------------------------------------------------------------
    def _check_open(self) -> None:
        self._session._check_open()  # first: a closed session or connection says so
        if self._closed:
            raise IllegalStateException(
                f"{self!r} is closed; create a new one with session.create_consumer()")

    def _ended(self) -> bool:
        """Whether this consumer, its session or its connection is closed or closing."""
        return self._closed or self._session._ending()

    def _pull_one(self) -> None:
        """Pull mode (limit 0): ask the broker for exactly one message if none is coming."""
        with self._lock:
            credit = self._buffer.pull_credit()
        if credit:
            self._session._transport.grant_credit(self.consumer_id, credit)

    def _wait_turn(self, connection: OwnerConnection, deadline: float | None) -> bool:
        """One wait of a receiving thread, under ``self._lock``, for a delivery or a
        close to notify it: False once ``deadline`` has passed. A connection lost for good
        raises its ``JMSException`` at once (nothing more can arrive: say why, now)."""
        lost = connection._lost
        if lost is not None:
            raise JMSException(str(lost), error_code=lost.error_code)
        if deadline is None:
            self._cond.wait()
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self._cond.wait(remaining)
        return True

    def _wait_for_message(self, deadline: float | None) -> Message | None:
        pull = self._buffer.limit == 0
        connection = self._session._connection
        if pull:
            self._pull_one()
        message: Message | None = None
        with self._lock:
            self._receiving += 1
            try:
                while not self._closed:
                    if connection.started:
                        item = cast(Message | None, self._buffer.pop())
                        if item is not None:
                            message = item
                            break
                    if not self._wait_turn(connection, deadline):
                        break
            finally:
                self._receiving -= 1
        if message is None and pull and not self._closed:
            # The pull timed out: take the credit back so a message that arrives later
            # is not stranded here; if the broker had already used it, the message is
            # (or is about to be) in our buffer.
            returned = self._session._transport.revoke_credit(self.consumer_id)
            with self._lock:
                self._buffer.revoked(returned)
                if returned == 0 and connection.started:
                    item = cast(Message | None, self._buffer.pop())
                    if item is not None:
                        message = item
        return message

    def _dispatchable(self) -> bool:
        """Whether the session's dispatcher has work here (listener set, buffer not empty)."""
        with self._lock:
            return len(self._buffer) > 0 and not self._closed and self._listener is not None

    def _has_buffered(self) -> bool:
        with self._lock:
            return len(self._buffer) > 0 and not self._closed

    def _consumed(self, count: int, drops: int) -> None:
        """``count`` messages were acknowledged/committed: maybe ask for the next batch.

        ``drops`` is the connection's count of drops when the caller found them alive
        (:attr:`Connection.drops`): if the connection dropped since, the drop already
        forgot them with everything else unconsumed, and counting them again would
        take credit from the resumed connection's deliveries."""
        with self._lock:
            if self._closed or drops != self._session._connection.drops:
                return
            want = self._buffer.consumed(count)
        flow = self._session._connection._flow
        if want > 0 or flow.enabled:
            flow.top_up(self)
        if self._buffer.limit == 0 and self._listener is not None:
            self._pull_one()

    def _interrupted(self) -> None:
        """The connection dropped: every buffered and taken-but-unconsumed message is
        dead (the broker redelivers them) and no credit is outstanding any more."""
        with self._lock:
            buf = self._buffer
            buf.drain()
            buf.forget(buf.unconsumed)
            buf.revoked(buf.outstanding)
            watchers = self._wake()
        call_watchers(watchers)

    def _returned(self, taken: int, drops: int) -> list[Message]:
        """Recover/rollback: hand back ``taken`` app-held messages and the whole buffer.

        Returns the drained (never seen by the app) messages, in delivery order. The
        ``taken`` were counted alive at the connection's ``drops``-th drop: after another
        drop they are forgotten already, like everything the buffer held.
        """
        with self._lock:
            drained = cast(list[Message], self._buffer.drain())
            if taken and drops == self._session._connection.drops:
                self._buffer.forget(taken)
            watchers = self._wake()
        call_watchers(watchers)
        return drained


class QueueBrowser:
    """Looks at a queue's messages without consuming them (a snapshot, in order)."""

    def __init__(self, session: ConsumerSession[Any], queue: Queue, selector: str | None) -> None:
        self._session = session
        self.queue = queue
        self.selector = selector
        self._closed = False

    def get_enumeration(self) -> Iterator[Message]:
        if self._closed:
            raise IllegalStateException("QueueBrowser is closed")
        self._session._check_open()
        return iter(self._session._transport.browse(self.queue, self.selector))

    def __iter__(self) -> Iterator[Message]:
        return self.get_enumeration()

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> QueueBrowser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
