"""``vm://NAME``: the bundled reference broker, in this process, with no network.

A connection to an in-process broker (:class:`~.vm_host.BrokerHost`, which serialises
every call with one lock; :func:`start_broker`, :func:`get_broker` and
:func:`stop_broker` keep them by name in :mod:`.vm_host`). Deliveries come back
synchronously through the core's session callback, on whichever thread made the call
that freed them (a send, an ack, a credit grant); the connection only buffers them there,
so user code still never runs inside the broker.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar
from urllib.parse import SplitResult

from jmspy import errors
from jmspy.broker_ref.core import BrokerError
from jmspy.broker_ref.core.api import (
    Delivery,
    DestinationKind,
    DestinationStats,
    ServerMessage,
)
from jmspy.broker_ref.core.settings import is_wildcard
from jmspy.destinations import Destination, Queue
from jmspy.logs import transport_logger
from jmspy.message import Message
from jmspy.reconnect import ReconnectPolicy, reconnect_in_background
from jmspy.transport import (
    ConsumerSpec,
    Credentials,
    RemoteConsumer,
    TransportListener,
)
from jmspy.transports import twins

from .capabilities import native_features
from .destination_options import resolve
from .vm_errors import translate
from .vm_host import BrokerHost, get_broker, start_broker, stop_broker
from .vm_url_options import URL_OPTIONS, VM_URL_OPTIONS

__all__ = ["BrokerHost", "VmTransport", "get_broker", "start_broker", "stop_broker"]

log = transport_logger("vm")

T = TypeVar("T")

# -- message mapping ----------------------------------------------------------------------
# The per-message conversions are twins (vm_convert.py beside this module documents them).
_convert = twins.vm_convert
to_client_message: Callable[..., Message] = _convert.to_client_message
_dest_key: Callable[[Destination], tuple[DestinationKind, str]] = _convert.dest_key
_DeliverMany = _convert.DeliverMany
_Sender = twins.vm_send.Sender
_SENT, _FAILED = twins.vm_send.SENT, twins.vm_send.FAILED


# -- errors: the broker core's exception classes map to JMS ones (vm_errors.py) ----------
_translate = translate


class _Callback:
    """The core's (batch) SessionCallback for one vm connection: convert, hand over."""

    __slots__ = ("deliver_many", "listener", "parked")

    def __init__(self, listener: TransportListener, parked: dict[int, _Waiting]) -> None:
        self.listener = listener
        #: the transport's parked sends by ticket number (VmTransport.send)
        self.parked = parked
        #: A run of deliveries to one consumer: converted in one call, buffered in one
        #: (a twin: compiled, the core's dispatch calls C all the way to the client).
        self.deliver_many = _DeliverMany(listener.on_deliveries)

    def deliver(self, delivery: Delivery) -> None:
        tag = delivery.delivery_tag
        count = delivery.delivery_count
        self.listener.on_delivery(
            delivery.consumer_id, tag, to_client_message(delivery.message, tag, count), count
        )

    def consumer_closed(self, consumer_id: int, reason: str) -> None:
        self.listener.on_transport_error(
            errors.IllegalStateException(f"the broker closed consumer {consumer_id}: {reason}")
        )

    def send_done(self, ticket: object, error: BrokerError | None) -> None:
        """A send or commit producer flow control held (lock held): wake its caller."""
        if isinstance(ticket, _Waiting):  # a commit's
            ticket.settle(error)
        else:  # a send's number: its waiter was registered when the broker parked it
            assert isinstance(ticket, int)
            self.parked.pop(ticket).settle(error)


class _Waiting:
    """A send (or commit) the broker parked for space: the producer's thread waits here,
    outside the broker's lock, so consumers (its own too) keep acknowledging.

    Made only for a send the broker parked (a send carries just a number until then) and
    for each commit; a lock taken at birth and released by :meth:`settle`, cheaper than a
    ``threading.Event`` (~2 us to make)."""

    __slots__ = ("_done", "error")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()
        self.error: BrokerError | None = None

    def settle(self, error: BrokerError | None) -> None:
        self.error = error
        self._done.release()

    def wait(self) -> None:
        self._done.acquire()  # until settle() releases it
        if self.error is not None:
            raise _translate(self.error)


class _Calling:
    """A send the broker parked for space whose sender does not wait (``send_inline``):
    the broker's settle calls ``done`` with the outcome, under its lock, which suits only
    a ``done`` that just hands the outcome over (jmspy.aio's: one call_soon_threadsafe)."""

    __slots__ = ("_done",)

    def __init__(self, done: Callable[[Exception | None], None]) -> None:
        self._done = done

    def settle(self, error: BrokerError | None) -> None:
        self._done(None if error is None else _translate(error))


_connection_ids = itertools.count(1)

#: What these calls release died with a stopped broker (consumers, credit, delivery
#: tags): they succeed at once, returning this, instead of waiting for a reconnect.
_DIED_WITH_THE_BROKER: Mapping[str, Any] = {
    "close_consumer": None, "revoke_credit": 0, "ack": None, "cancel": None,
    "release_flow": None,
    # the broker that held the leases is gone, and its messages with them (or they come
    # back from its store as ready ones): nothing is lent or left to settle
    "lend": None, "settle": 0, "release": 0,
}


class VmTransport:
    """The Transport interface over an in-process :class:`BrokerHost`."""

    scheme = "vm"
    #: Sends are synchronous calls into the broker: no in-flight window.
    send_async = None
    #: Everything the capability matrix marks native for vm://, and in-process acks.
    capabilities = native_features("vm", "embedded")
    in_process = True
    #: The query options each scheme's URLs take (checked when the factory is made).
    url_options = URL_OPTIONS

    def __init__(self, url: SplitResult, properties: Mapping[str, Any]) -> None:
        name = url.netloc or url.path.strip("/") or "embedded"
        self.host = get_broker(name, create=VM_URL_OPTIONS.parse(url)["create"])
        self.where = f"vm://{name}"
        self._conn: Any = None
        self.reconnect = ReconnectPolicy.from_properties(properties)
        self._specs: dict[int, ConsumerSpec] = {}  # re-created on the restarted broker
        #: consumer id -> credit it may still be granted (``consumer.maxMessages``)
        self._budgets: dict[int, int] = {}
        self._opened_with: tuple[TransportListener, Credentials] | None = None
        self._settled = threading.Event()  # set unless a stopped broker is awaited
        self._resume_tag = 1  # the first delivery tag after a reconnect
        self._settled.set()
        self._lost: str | None = None
        self._closing = False
        #: sendTimeout (ms): how long a send may wait for space (0 = as long as it takes)
        self._send_timeout = int(properties.get("sendTimeout", 30_000))
        #: parked sends' waiters by ticket: the Sender adds them, _Callback settles them
        self._parked: dict[int, _Waiting] = {}
        #: Sends are the Sender's (a twin: transports/vm_send.py), called directly.
        self._sender = _Sender(self._parked, _Waiting, self._send_failed, self._send_timeout)
        self.send = self._sender.send
        self._try_send = self._sender.try_send
        #: imqConnectionFlowLimit: the core gates deliveries on it (its ConnectionGate),
        #: told of every message that leaves the client's buffers (release_flow)
        self._flow_limit: int | None = (
            int(properties.get("imqConnectionFlowLimit", 1000))
            if properties.get("imqConnectionFlowLimitEnabled") else None)
        self.broker_connection_flow = self._flow_limit is not None
        self.release_flow: Callable[[int], None] | None = (
            self._release_flow if self._flow_limit is not None else None)

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        conn = self._conn
        if conn is None:
            raise errors.IllegalStateException("the vm connection is closed")
        try:
            with self.host.lock:
                return fn(*args, **kwargs)
        except Exception as exc:
            return self._failed(conn, fn, exc, args, kwargs)

    def _failed(self, conn: Any, fn: Callable[..., T], exc: Exception,
                args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        """``fn`` (a method of broker connection ``conn``) raised ``exc``: a call the
        broker's stop made moot returns what it would have, one that must happen is made
        again once reconnected; anything else is raised as what it means to JMS."""
        if conn.closed and self._conn is not None:  # the broker stopped under us
            if fn.__name__ in _DIED_WITH_THE_BROKER:
                return _DIED_WITH_THE_BROKER[fn.__name__]  # type: ignore[no-any-return]
            again: Callable[..., T] = getattr(self._await_broker(), fn.__name__)
            return self._call(again, *args, **kwargs)
        raise _translate(exc) from exc

    # Transport interface ----------------------------------------------------------------
    def open(self, listener: TransportListener, credentials: Credentials) -> None:
        self._opened_with = (listener, credentials)
        self._attach(self.host, 1)

    def _attach(self, host: BrokerHost, first_tag: int) -> None:
        """Connect to ``host`` and subscribe every open consumer; delivery tags go on
        from ``first_tag`` (the core takes every earlier tag for a dead one)."""
        assert self._opened_with is not None
        listener, credentials = self._opened_with
        try:
            with host.lock:
                conn = host.broker.connect(
                    _Callback(listener, self._parked), client_id=credentials.client_id,
                    user=credentials.user, password=credentials.password,
                    flow_limit=self._flow_limit)
                conn._channel.next_tag = first_tag
                for spec in self._specs.values():
                    conn.create_consumer(**self._consumer_args(spec))
                host.transports.add(self)
                self.host, self._conn = host, conn
                self._sender.attach(conn, host)
        except Exception as exc:
            raise _translate(exc) from exc
        log.debug("attached to the in-process broker %s (%d consumer(s))", self.where,
                  len(self._specs))

    def server_closed(self) -> None:
        """BrokerHost.stop, lock held: calls from now on wait for the reconnect."""
        self._settled.clear()
        self._conn.close()

    def broker_stopped(self) -> None:
        """The broker was stopped (BrokerHost.stop): tell the core, then wait for a
        broker of the same name if reconnecting is on (never create one: someone chose to
        stop it)."""
        listener, _ = self._opened_with or (None, None)
        if not self.reconnect.enabled:
            self._give_up("reconnecting is off (imqReconnectEnabled=False)")
            return
        if listener is not None:
            listener.on_connection_interrupted(errors.JMSException(
                f"the in-process broker {self.where} was stopped; reconnecting once a broker "
                "of that name is started again", error_code="CONNECTION_INTERRUPTED"))
        conn = self._conn
        if conn is None:
            return
        self._resume_tag = conn._channel.next_tag  # tags keep rising across the reconnect
        reconnect_in_background(self, f"jmspy-vm-reconnect-{self.host.name}",
                                on_closed=self.close)

    # -- what jmspy.reconnect.reconnect_in_background drives (its own thread) ---------------
    def _reconnect_closing(self) -> bool:
        return self._closing

    #: one broker of that name: nothing to move along
    _reconnect_addresses = 1

    def _reconnect_once(self, address: int) -> None:
        self._attach(get_broker(self.host.name, create=False), self._resume_tag)

    def _reconnect_failed(self, why: str) -> None:
        if self._closing:
            self.close()  # closed meanwhile
        else:
            self._give_up(why)

    def _reconnected(self) -> None:
        if self._closing:
            self.close()  # closed meanwhile: leave no connection behind on the new broker
            return
        self._settled.set()
        if self._opened_with is not None:
            self._opened_with[0].on_connection_resumed()

    def _give_up(self, why: str) -> None:
        self._lost = (f"the in-process broker {self.where} was stopped; {why}; create a "
                      "new connection once it is started again")
        self._settled.set()
        if self._opened_with is not None and self._conn is not None:
            self._opened_with[0].on_connection_interrupted(
                errors.JMSException(self._lost, error_code="CONNECTION_LOST"))

    def _await_broker(self) -> Any:
        """A call found the broker stopped: wait for the reconnect's outcome."""
        self._settled.wait()
        conn = self._conn
        if conn is None or conn.closed:
            raise errors.JMSException(
                self._lost or f"the in-process broker {self.where} is closed",
                error_code="CONNECTION_LOST",
            )
        return conn

    def close(self) -> None:
        self._closing = True
        self._settled.set()  # release calls waiting for a reconnect
        conn = self._conn
        if conn is None:
            return
        self._conn = None
        self._sender.detach()
        try:
            with self.host.lock:
                self.host.transports.discard(self)
                conn.close()
        except Exception as exc:
            raise _translate(exc) from exc

    @staticmethod
    def _consumer_args(spec: ConsumerSpec) -> dict[str, Any]:
        kind, name = _dest_key(spec.destination)
        return dict(consumer_id=spec.consumer_id, kind=kind, destination=name,
                    selector=spec.selector, no_local=spec.no_local,
                    subscription_name=spec.subscription_name, durable=spec.durable,
                    shared=spec.shared, auto_ack=spec.auto_ack, credit=0)

    def declare_destination(self, destination: Destination) -> None:
        """Check ``destination``'s options and set what they ask of the queue in the
        broker now (ring size, expiration: see .destination_options)."""
        options = resolve("vm", "embedded", destination, where=self.where)
        if options.ring_size is None and options.expiration_ms is None:
            return
        host, name = self.host, destination.name
        if is_wildcard(name):  # the exact-name settings would reach every queue it matches
            raise errors.InvalidDestinationException(
                f"{destination} has a wildcard word, so its queue settings would apply to "
                "every queue it matches; set them in the broker's address settings instead")
        try:
            with host.lock:
                broker = host.broker
                if options.ring_size is not None:
                    broker.create_queue(name, ring_size=options.ring_size)
                ttl = options.expiration_ms
                settings = broker.settings_for(name)
                if ttl is not None and (settings.expiration_ms, settings.expiration_model
                                        ) != (ttl, "earliest"):
                    broker.set_settings(name, replace(settings, expiration_ms=ttl,
                                                      expiration_model="earliest"))
        except Exception as exc:
            raise _translate(exc) from exc

    def create_consumer(self, spec: ConsumerSpec) -> RemoteConsumer:
        self.declare_destination(spec.destination)
        info = self._call(self._conn.create_consumer, **self._consumer_args(spec))
        log.debug("consumer %d subscribed to %s on %s", spec.consumer_id, spec.destination,
                  self.where)
        self._specs[spec.consumer_id] = spec
        limit = info.destination_flow_limit
        resolved = resolve("vm", "embedded", spec.destination, where=self.where)
        if resolved.max_messages is not None:
            self._budgets[spec.consumer_id] = resolved.max_messages
        option = resolved.flow_limit
        if option is not None and (limit is None or option < limit):
            limit = option  # consumer.prefetchSize: the lower of it and the queue's
        return RemoteConsumer(destination_flow_limit=limit)

    def close_consumer(self, consumer_id: int) -> None:
        self._specs.pop(consumer_id, None)
        self._budgets.pop(consumer_id, None)
        self._call(self._conn.close_consumer, consumer_id)

    def grant_credit(self, consumer_id: int, credits: int) -> None:
        budget = self._budgets.get(consumer_id)
        if budget is not None:  # consumer.maxMessages: no credit past it
            credits = min(credits, budget)
            self._budgets[consumer_id] = budget - credits
            if credits <= 0:
                return
        self._call(self._conn.grant_credit, consumer_id, credits)

    def _release_flow(self, count: int) -> None:
        self._call(self._conn.release_flow, count)

    def revoke_credit(self, consumer_id: int) -> int:
        returned: int = self._call(self._conn.revoke_credit, consumer_id)
        if consumer_id in self._budgets:  # credit taken back unused: still to be had
            self._budgets[consumer_id] += returned
        return returned

    def _send_failed(self, exc: Exception, conn: Any, message: Message,
                     tx: str | None) -> None:
        """A send (``self.send``, the Sender's) raised ``exc`` on broker connection
        ``conn``: send again once reconnected if the broker stopped under it, else raise
        what ``exc`` means to JMS."""
        if conn.closed and self._conn is not None:  # the broker stopped under us
            self._await_broker()
            self.send(message, tx)
            return
        raise _translate(exc) from exc

    def send_inline(self, message: Message, tx: str | None,
                    done: Callable[[Exception | None], None]) -> bool:
        """A send for a caller that must not wait (an event loop's; the connection uses
        it only for a completion listener marked ``runs_on_any_thread``): ``done(None)``
        before this returns when the broker took the message, or ``done(outcome)`` from
        the broker once producer flow control lets a parked one in. False, with nothing
        sent and ``done`` not called, when the send raised: the caller sends it with
        ``send()`` on a thread (which waits for a reconnect, or raises what it means)."""
        outcome = self._try_send(message, tx, lambda: _Calling(done))
        if outcome == _SENT:
            done(None)
        return outcome != _FAILED

    def ack(self, delivery_tags: list[int], tx: str | None = None) -> None:
        self._call(self._conn.ack, delivery_tags, tx)

    def try_ack(self, delivery_tags: list[int]) -> bool:
        """:meth:`ack`, unless another thread holds the broker's lock right now (then
        False and nothing happened: see ``Transport.try_ack``)."""
        conn = self._conn
        lock = self.host.lock
        if conn is None or not lock.acquire(blocking=False):
            return False  # (closed: the caller's ack() says so, or waits for the broker)
        error: Exception | None = None
        try:
            conn.ack(delivery_tags)
        except Exception as exc:
            error = exc
        finally:
            lock.release()
        if error is not None:  # outside the lock, as _call does it
            self._failed(conn, conn.ack, error, (delivery_tags,), {})
        return True

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True) -> None:
        self._call(self._conn.cancel, delivery_tags, redelivered=redelivered)

    def lend(self, delivery_tags: list[int], token: str, ttl_ms: int | None) -> None:
        self._call(self._conn.leases.lend, delivery_tags, token, ttl_ms)

    def settle_leases(self, tokens: list[str], *, release: bool = False) -> int:
        leases = self._conn.leases
        count: int = self._call(leases.release if release else leases.settle, tokens)
        return count

    def begin(self, tx: str) -> None:
        self._call(self._conn.begin, tx)

    def commit(self, tx: str) -> None:
        waiting = _Waiting()
        if not self._call(self._conn.commit, tx, ticket=waiting, timeout_ms=self._send_timeout):
            with self.host.lock:
                self.host.poke_timers()
            waiting.wait()  # its sends wait for space, as one

    def rollback(self, tx: str) -> None:
        self._call(self._conn.rollback, tx)

    def browse(self, queue: Queue, selector: str | None) -> list[Message]:
        snapshot: list[ServerMessage] = self._call(self._conn.browse, queue.name, selector)
        return [to_client_message(sm) for sm in snapshot]

    def unsubscribe(self, name: str) -> None:
        self._call(self._conn.unsubscribe, name)

    def create_temporary_queue(self) -> str:
        name: str = self._call(self._conn.create_temporary_queue)
        return name

    def delete_temporary_queue(self, name: str) -> None:
        self._call(self._conn.delete_temporary_queue, name)

    def destination_stats(self, destination: Destination) -> dict[str, Any]:
        kind, name = _dest_key(destination)
        stats: DestinationStats = self._call(self._conn.stats, name, kind)  # needs admin
        return stats.as_dict()
