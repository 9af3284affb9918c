"""``WorkerPool``: a message-driven pool -- one connection and one consumer feeding up to
``maxPoolSize`` listener instances that run at once, as an application server runs MDBs.

Why one consumer: that is how an application server delivers to an MDB. The resource
adapter's single consumer takes messages and hands each to a free bean instance; the
message is acknowledged when the instance returns. A consequence of Open MQ flow control
follows: the consumer can hold no more unacknowledged messages than its flow limit, so

    concurrency = min(maxPoolSize, effective consumer flow limit, connection flow limit)

and a flow limit below the pool size *reduces the pool*. The pool says so at start (a
warning naming both numbers) and offers ``prefetch="pool"``, which sizes
``imqConsumerFlowLimit`` from the pool. In a cluster (several pools on one queue) the
other side of the dilemma shows: a flow limit far above the pool size lets one pool take
a burst the others could have shared.

Mechanics. A dispatcher thread takes a free slot (one per instance), then receives one
message and queues it for a worker; a worker runs the listener with its own instance and
acknowledges the message (``INDIVIDUAL_ACKNOWLEDGE``: that message only) when it
returns. A listener that raises gets the message again after
``endpointExceptionRedeliveryInterval`` ms, marked redelivered, up to
``endpointExceptionRedeliveryAttempts`` times; then it goes to the dead message queue
with the reason (``sendUndeliverableMsgsToDMQ``), or, with that off, is left
unacknowledged (the broker has it again, redelivered, once the pool stops). Workers are
threads (I/O-bound listeners) or each a process (:mod:`.processes`, CPU-bound ones).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from jmspy.connection import Connection
from jmspy.consumer import MessageConsumer
from jmspy.destinations import Destination, Queue, TemporaryQueue, TemporaryTopic, Topic
from jmspy.errors import IllegalStateException, InvalidConfigurationException, JMSException
from jmspy.factory import ConnectionFactory
from jmspy.message import Message
from jmspy.session import Session

from .activation import ActivationSpec
from .instances import Handler, ListenerSpec, WorkerDied, load_listener

__all__ = ["DEAD_LETTER_REASON", "WorkerPool"]

log = logging.getLogger("jmspy.client.pool")

#: The property naming why a message went to the dead message queue (the broker's name).
DEAD_LETTER_REASON = "JMS_jmspy_DeadLetterReason"
#: The property naming where it was consumed from.
ORIGINAL_DESTINATION = "JMS_jmspy_OriginalDestination"

_STOP = object()


class WorkerPool:
    """See the module docstring. ``destination``: a Queue or Topic (from
    ``session.create_queue`` / ``create_topic``), or a name (a queue unless
    ``destinationType="topic"``). ``activation``: the activation properties
    (:class:`~.activation.ActivationSpec`), camelCase or snake_case (one spelling each).

    ``prefetch``: None keeps the factory's ``imqConsumerFlowLimit``; ``"pool"`` sets it
    to ``max_pool_size`` (so the pool can be busy), with ``imqConsumerFlowThreshold`` 100 so each
    instance that frees up gets a message at once; an int sets the limit to that.
    ``processes``: each worker is a process holding its own instance (the listener must
    then be importable: a class or function at module level, or ``"module:attribute"``).
    """

    def __init__(self, factory: ConnectionFactory, destination: str | Destination,
                 listener: ListenerSpec, *, max_pool_size: int | None = None,
                 processes: bool = False, prefetch: int | str | None = None,
                 **activation: Any) -> None:
        if max_pool_size is not None:  # a keyword of its own, one property all the same
            activation = {**activation, "max_pool_size": max_pool_size}
        if isinstance(destination, Destination):
            destination = _activation_destination(destination, activation)
        self.spec = ActivationSpec.from_properties(destination, activation)
        self._factory = _factory_for(factory, prefetch, self.spec.max_pool_size)
        self.processes = processes
        self._listener = listener
        self._handlers: Callable[[], Handler]
        if processes:
            from .processes import process_handlers
            self._handlers = process_handlers(listener, self._worker_died)
        else:
            self._handlers = load_listener(listener)
        self._lock = threading.Condition()
        self._work: deque[Message] = deque()
        self._slots = threading.Semaphore(self.spec.max_pool_size)
        self._workers = 0
        self._idle = 0
        self._busy = 0
        self._acking = 0  # listeners returned, acknowledgement under way
        self._peak = 0
        self._counts = {"processed": 0, "failed": 0, "redelivered": 0, "dead_lettered": 0,
                        "replaced": 0}
        self._running = False
        self._stopped = threading.Event()
        self._conn: Connection | None = None
        self._consumer: MessageConsumer | None = None
        self._dlq_session: Session | None = None
        self._dispatcher: threading.Thread | None = None
        #: min(maxPoolSize, flow limits), known once started
        self.concurrency = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> WorkerPool:
        """Connect, create the one consumer, warn if a flow limit reduces the pool, and
        start taking messages. Returns the pool (for ``with WorkerPool(...).start()``)."""
        if self._running or self._conn is not None:
            raise IllegalStateException("this worker pool was already started")
        spec = self.spec
        conn = self._factory.create_connection(client_id=spec.client_id)
        try:
            session = conn.create_session(ack_mode=Session.INDIVIDUAL_ACKNOWLEDGE)
            consumer: MessageConsumer
            if spec.destination_type == "queue":
                consumer = session.create_consumer(Queue(spec.destination),
                                                   spec.message_selector)
            elif spec.durable:
                assert spec.subscription_name is not None
                consumer = session.create_durable_consumer(
                    Topic(spec.destination), spec.subscription_name, spec.message_selector)
            else:
                consumer = session.create_consumer(Topic(spec.destination),
                                                   spec.message_selector)
            self._dlq_session = conn.create_session()
        except BaseException:
            conn.close()
            raise
        self._conn, self._consumer = conn, consumer
        self.concurrency = self._check_limits(consumer)
        self._running = True
        with self._lock:
            self._spawn(spec.steady_pool_size)
        conn.start()
        self._dispatcher = threading.Thread(target=self._dispatch, daemon=True,
                                            name=f"jmspy-pool-{spec.destination}")
        self._dispatcher.start()
        return self

    def _check_limits(self, consumer: MessageConsumer) -> int:
        """The concurrency rule, said out loud: a flow limit below the pool size is the most
        instances that will ever run at once."""
        spec = self.spec
        flow = consumer.flow_stats()
        props = self._factory.properties
        limits = {"maxPoolSize": spec.max_pool_size}
        if flow.limit > 0:
            limits["the consumer flow limit" + (
                f" (imqConsumerFlowLimit={flow.client_limit})" if flow.limited_by == "client"
                else f" (the destination's consumerFlowLimit={flow.limit})")] = flow.limit
        if props["imqConnectionFlowLimitEnabled"]:
            limits[f"imqConnectionFlowLimit={props['imqConnectionFlowLimit']}"] = int(
                props["imqConnectionFlowLimit"])
        name, concurrency = min(limits.items(), key=lambda kv: kv[1])
        if concurrency < spec.max_pool_size:
            log.warning(
                "worker pool on %s: %s is below maxPoolSize=%d, so at most %d messages are "
                "processed at once: you are reducing the pool. Raise the limit, or pass "
                "prefetch=\"pool\" to size imqConsumerFlowLimit from the pool",
                spec.destination, name, spec.max_pool_size, concurrency)
        return concurrency

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking messages, let in-flight work finish (up to ``timeout`` seconds),
        then close: every message not yet acknowledged -- buffered, queued, or still
        being processed past the timeout -- goes back to the broker, which delivers it
        again marked redelivered."""
        if self._conn is None or self._stopped.is_set():
            return
        self._running = False
        if self._dispatcher is not None:
            self._dispatcher.join(timeout)
        deadline = time.monotonic() + timeout
        with self._lock:
            while ((self._busy or self._work or self._acking)
                   and time.monotonic() < deadline):
                self._lock.wait(min(0.1, max(0.0, deadline - time.monotonic())))
            left = self._busy + len(self._work)
            self._work.clear()
            for _ in range(self._workers):
                self._work.append(_STOP)  # type: ignore[arg-type]
            self._lock.notify_all()
        if left:
            log.warning("worker pool on %s: %d message(s) still in flight after %.1f s; "
                        "they go back to the broker", self.spec.destination, left, timeout)
        self._stopped.set()
        conn, self._conn = self._conn, None
        try:
            conn.close()
        except JMSException as exc:
            log.warning("worker pool on %s: closing the connection: %s",
                        self.spec.destination, exc)

    @property
    def running(self) -> bool:
        """True while the pool takes messages: started, not stopped, and its consumer
        still receiving (False once the connection was lost for good)."""
        dispatcher = self._dispatcher
        return (self._running and dispatcher is not None and dispatcher.is_alive()
                and not self._stopped.is_set())

    def __enter__(self) -> WorkerPool:
        if self._conn is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ stats

    def stats(self) -> dict[str, Any]:
        """``busy``, ``idle``, ``peak_concurrency``, ``in_flight`` (taken from the
        consumer, not yet acknowledged), ``processed``, ``failed`` (listener calls that
        raised), ``redelivered``, ``dead_lettered``, ``workers``, ``concurrency`` and
        ``flow`` (the consumer's ``flow_stats()`` as a dict)."""
        with self._lock:
            out: dict[str, Any] = {
                "busy": self._busy,
                "idle": self._idle,
                "workers": self._workers,
                "peak_concurrency": self._peak,
                "in_flight": self._busy + len(self._work),
                **self._counts,
                "concurrency": self.concurrency,
            }
        consumer = self._consumer
        out["flow"] = asdict(consumer.flow_stats()) if consumer is not None else {}
        return out

    # ------------------------------------------------------------------ dispatching

    def _dispatch(self) -> None:
        """Take a free slot, then one message, and queue it for a worker."""
        consumer = self._consumer
        assert consumer is not None
        while self._running:
            if not self._slots.acquire(timeout=0.1):
                continue
            message = None
            try:
                while self._running and message is None:
                    message = consumer.receive(0.1)
            except JMSException as exc:
                if self._running:
                    log.error("worker pool on %s: receiving failed: %s", self.spec.destination,
                              exc)
                    self._running = False
            if message is None:
                self._slots.release()
                return
            with self._lock:
                self._work.append(message)
                if len(self._work) > self._idle and self._workers < self.spec.max_pool_size:
                    self._spawn(min(self.spec.pool_resize_quantity,
                                    self.spec.max_pool_size - self._workers))
                self._lock.notify()

    def _spawn(self, n: int) -> None:
        """Start ``n`` more workers (lock held)."""
        for _ in range(n):
            self._workers += 1
            self._idle += 1
            threading.Thread(target=self._work_loop, daemon=True,
                             name=f"jmspy-pool-worker-{self.spec.destination}").start()

    def _work_loop(self) -> None:
        handler = self._handlers()  # this worker's own instance (an MDB bean)
        spec = self.spec
        try:
            while True:
                with self._lock:
                    while not self._work:
                        if (not self._lock.wait(spec.idle_timeout) and not self._work
                                and self._workers > spec.steady_pool_size):
                            return  # idle too long above the steady size
                    message = self._work.popleft()
                    if message is _STOP:
                        return
                    self._idle -= 1
                    self._busy += 1
                    self._peak = max(self._peak, self._busy)
                settle = False
                try:
                    settle = self._deliver(handler, message)
                finally:
                    # the instance is free once its listener returned: counted idle before
                    # the acknowledgement (which returns the consumer's credit, so the next
                    # message may start before this thread is back), or the pool would seem
                    # to run more at once than the flow limit allows
                    with self._lock:
                        self._busy -= 1
                        self._idle += 1
                        self._acking += settle
                    if settle:
                        self._settle(message)
                    with self._lock:
                        self._acking -= settle
                        self._lock.notify_all()
                    self._slots.release()
        finally:
            with self._lock:
                self._workers -= 1
                self._idle -= 1
            close = getattr(handler, "close", None)
            if callable(close) and self.processes:
                close()

    def _deliver(self, handler: Handler, message: Message) -> bool:
        """Run the listener; redeliver after an exception, up to the attempts; then
        dead-letter. True: the caller acknowledges the message (processed, or its copy is
        in the dead message queue)."""
        spec = self.spec
        interval = spec.endpoint_exception_redelivery_interval / 1000.0
        consumer = self._consumer
        telemetry = None if consumer is None else consumer._telemetry
        error: BaseException | None = None
        for attempt in range(spec.endpoint_exception_redelivery_attempts + 1):
            if attempt:
                if self._stopped.wait(interval):
                    return False  # the pool closed: the broker has it back
                message.redelivered = True
                message.delivery_count += 1
                self._count("redelivered")
            try:
                if telemetry is None:
                    handler(message)
                else:  # a process span, child of the sender's (jmspy/telemetry.py)
                    telemetry.process(consumer, message, handler)
            except WorkerDied as died:
                error = died  # the process is replaced; the message goes again at once
                self._count("failed")
                continue
            except Exception as exc:
                error = exc
                self._count("failed")
                log.info("worker pool on %s: the listener raised on %s (attempt %d): %s",
                         spec.destination, message.message_id, attempt + 1, exc)
                continue
            self._count("processed")
            return True
        return self._undeliverable(message, error)

    def _settle(self, message: Message) -> None:
        try:
            message.acknowledge()
        except JMSException as exc:  # the connection closed under it (stop timeout)
            log.warning("worker pool on %s: %s was processed but could not be acknowledged "
                        "(%s); the broker will deliver it again, marked redelivered",
                        self.spec.destination, message.message_id, exc)

    def _undeliverable(self, message: Message, error: BaseException | None) -> bool:
        spec = self.spec
        said = str(error).splitlines()[0] if str(error) else ""  # not a process's traceback
        reason = (f"the listener raised {type(error).__name__}: {said} on each of "
                  f"{spec.endpoint_exception_redelivery_attempts + 1} deliveries "
                  "(endpointExceptionRedeliveryAttempts)")
        if not spec.send_undeliverable_msgs_to_dmq:
            log.error("worker pool on %s: %s is undeliverable (%s); "
                      "sendUndeliverableMsgsToDMQ is off, so it is left unacknowledged",
                      spec.destination, message.message_id, reason)
            return False
        copy = message.copy()
        copy.set_property(DEAD_LETTER_REASON, reason)
        copy.set_property(ORIGINAL_DESTINATION, spec.destination)
        session = self._dlq_session
        if session is None:
            return False
        try:
            with self._lock:  # one producer session, shared by the workers
                session.create_producer(Queue(spec.dead_letter_queue)).send(copy)
        except JMSException as exc:
            log.error("worker pool on %s: could not dead-letter %s (%s); left "
                      "unacknowledged", spec.destination, message.message_id, exc)
            return False
        self._count("dead_lettered")
        log.warning("worker pool on %s: %s sent to %s: %s", spec.destination,
                    message.message_id, spec.dead_letter_queue, reason)
        return True

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _worker_died(self, why: str) -> None:
        """A process worker died (processes mode): it is replaced, and the pool says so."""
        self._count("replaced")
        log.warning("worker pool on %s: %s; a new worker process replaces it and the "
                    "message is delivered again, marked redelivered", self.spec.destination,
                    why)


def _activation_destination(destination: Destination, activation: dict[str, Any]) -> str:
    """A Queue or Topic given to the pool, as the activation properties name one: its
    name, and its kind as ``destinationType`` (which, if given too, must agree)."""
    if isinstance(destination, TemporaryQueue | TemporaryTopic):
        raise InvalidConfigurationException(
            f"worker pool: {destination} is temporary, and only the connection that made "
            "it may consume from it; the pool opens its own connection: give it a queue "
            "or topic by name")
    if destination.options:
        raise InvalidConfigurationException(
            f"worker pool: {destination} has destination options "
            f"({', '.join(destination.options)}); the pool takes the name alone")
    kind = "topic" if isinstance(destination, Topic) else "queue"
    names = {k: v for k, v in activation.items() if k in ("destinationType", "destination_type")}
    for key, value in names.items():
        if str(value).lower().rpartition(".")[2] != kind:
            raise InvalidConfigurationException(
                f"worker pool: {destination} is a {kind}, but {key}={value!r} says otherwise; "
                f"leave {key} out when passing a {type(destination).__name__}")
    if not names:
        activation["destination_type"] = kind
    return destination.name


def _factory_for(factory: ConnectionFactory, prefetch: int | str | None,
                 pool_size: int) -> ConnectionFactory:
    if prefetch is None:
        return factory
    props: dict[str, Any] = dict(factory.properties.snapshot())
    if prefetch == "pool":
        props["imqConsumerFlowLimit"] = pool_size
        # With the window exactly the pool, the default threshold (50 %) would refill it
        # only once half the instances are idle (measured: a 32-pool of 10 ms listeners
        # at 0.68-0.85x of its ideal rate); 100 % hands each freed slot a message at once.
        props["imqConsumerFlowThreshold"] = 100
    elif type(prefetch) is int and prefetch >= 0:
        props["imqConsumerFlowLimit"] = prefetch
    else:
        raise InvalidConfigurationException(
            f"worker pool: prefetch={prefetch!r} must be None, 'pool' or an int >= 0")
    return ConnectionFactory(factory.url, **props)
