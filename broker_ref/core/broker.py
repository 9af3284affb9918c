"""The broker: destinations, subscriptions, timers, persistence wiring, connections.

Sans-I/O and single-threaded by design: a host (the ``vm://`` transport, the STOMP
server) serialises every call into one ``Broker`` — with one lock, or by calling only
from its event loop — and calls :meth:`Broker.process_timers` when
:meth:`Broker.next_deadline` is due. Nothing here blocks, sleeps or reads a wall clock
other than the injected ``clock``; that is what makes the core testable with a fake clock
and reusable under any I/O model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import itertools
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .api import (
    DEAD_LETTER_REASON,
    ORIGINAL_DESTINATION,
    TEMP_PREFIX,
    AddressSettings,
    DestinationKind,
    DestinationStats,
    ServerMessage,
    SessionCallback,
)
from .connection import ServerConnection
from .errors import DestinationNotFound, IllegalBrokerState, InvalidClientId, InvalidDestination
from .queue import EXPIRED_REASON, MessageRef, Queue, compile_filter
from .settings import SettingsRegistry, is_wildcard
from .store import Store, SubscriptionRecord
from .topic import Subscription, SubscriptionKey, Topic, WildcardRoutes

if TYPE_CHECKING:
    from .security import Principal, SecurityPolicy

__all__ = ["Broker", "ServerConnection"]


#: Default ``max_destination_length`` in bytes (the STOMP ``[limits]`` key
#: ``max-destination-length``): long enough for any real naming scheme, short enough that
#: a hostile name cannot make routing or settings lookups expensive.
DEFAULT_MAX_DESTINATION_LENGTH = 1024


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    """An in-memory broker core. See the module docstring for the threading contract."""

    def __init__(
        self,
        *,
        settings: Mapping[str, AddressSettings] | None = None,
        default_settings: AddressSettings | None = None,
        store: Store | None = None,
        clock: Callable[[], int] | None = None,
        name: str = "embedded",
        security: SecurityPolicy | None = None,
        max_destination_length: int = DEFAULT_MAX_DESTINATION_LENGTH,
    ) -> None:
        if type(max_destination_length) is not int or max_destination_length < 1:
            raise ValueError(
                f"max_destination_length must be an int >= 1 (bytes), got "
                f"{max_destination_length!r}"
            )
        self.name = name
        #: longest destination (or subscription) name accepted, in UTF-8 bytes: routing
        #: and settings lookups cost time per word, so a name's size is bounded
        self.max_destination_length = max_destination_length
        #: users and permissions (see .security); None or disabled = no checks at all
        self.security = security
        self.store = store
        self._clock = clock or _wall_clock_ms
        self._settings = SettingsRegistry(default_settings or AddressSettings(), settings)
        self._queues: dict[str, Queue] = {}
        #: The queues by name, read-only (connections look up a send's queue here; the
        #: dict itself, typed read-only: a proxy's ``get`` costs a method call per send).
        self.queues: Mapping[str, Queue] = self._queues
        self._topics: dict[str, Topic] = {}
        #: topics named by a wildcard pattern, which concrete topics' messages also reach
        self._wildcards = WildcardRoutes()
        #: durable and shared subscriptions by key; subscription queue name -> subscription
        self._subscriptions: dict[SubscriptionKey, Subscription] = {}
        self._sub_queues: dict[str, Subscription] = {}
        self._connections: dict[int, ServerConnection] = {}
        self._client_ids: dict[str, int] = {}
        self._conn_ids = itertools.count(1)
        self._timers: list[tuple[int, int, int, Queue, MessageRef]] = []
        self._timer_seq = itertools.count()
        self.closed = False
        if store is not None:
            self._recover(store)

    # ------------------------------------------------------------------ QueueHost

    def now(self) -> int:
        return self._clock()

    def schedule_timer(self, due: int, kind: int, queue: Queue, ref: MessageRef) -> None:
        heapq.heappush(self._timers, (due, next(self._timer_seq), kind, queue, ref))

    def divert(
        self, source: Queue, message: ServerMessage, address: str | None, reason: str
    ) -> None:
        """Dead-letter/expiry routing. The target queue is created even when auto-create
        is off: losing a message because its DLQ was not pre-declared would be worse."""
        if address is None or address == source.name:
            return
        props = dict(message.properties)
        props[DEAD_LETTER_REASON] = reason
        props.setdefault(ORIGINAL_DESTINATION, message.destination)
        copy = dataclasses.replace(
            message,
            properties=props,
            kind=DestinationKind.QUEUE,
            destination=address,
            deliver_at=0,
            # an expired copy must not expire again on arrival (Artemis clears it too)
            expiration=0 if reason == EXPIRED_REASON else message.expiration,
        )
        target = self._queues.get(address)
        if target is None:
            target = self._new_queue(address)
        target.enqueue(copy)

    # ------------------------------------------------------------------ public API

    def connect(
        self,
        callback: SessionCallback,
        *,
        client_id: str | None = None,
        user: str | None = None,
        password: str | None = None,
        principal: Principal | None = None,
    ) -> ServerConnection:
        """Open a connection. With a security policy the credentials are checked first
        (:class:`~.errors.AuthenticationFailed`), before anything reveals broker state.

        ``principal``: the host already authenticated ``user`` (with
        ``security.authenticate``, off its event loop: hashing is slow) and passes the
        result instead of the password."""
        self._check_open()
        if principal is None and self.security:
            principal = self.security.authenticate(user, password)
        if client_id is not None and client_id in self._client_ids:
            raise InvalidClientId(
                f"client id {client_id!r} is already in use by another connection; close "
                "that connection first or choose a different client id"
            )
        conn = ServerConnection(
            self, next(self._conn_ids), callback, client_id, user, principal=principal
        )
        self._connections[conn.connection_id] = conn
        if client_id is not None:
            self._client_ids[client_id] = conn.connection_id
        return conn

    def stats(self, name: str, kind: DestinationKind = DestinationKind.QUEUE) -> DestinationStats:
        """Counters of a queue (or a subscription's queue, by its name) or a topic."""
        if kind is DestinationKind.TOPIC:
            topic = self._topics.get(name)
            if topic is None:
                raise DestinationNotFound(f"no topic named {name!r}; see topic_names()")
            return topic.stats()
        q = self._queues.get(name)
        if q is None:
            sub = self._sub_queues.get(name)
            if sub is None:
                raise DestinationNotFound(f"no queue named {name!r}; see queue_names()")
            q = sub.queue
        return q.stats()

    def all_stats(self) -> list[DestinationStats]:
        out = [self._queues[n].stats() for n in sorted(self._queues)]
        out.extend(self._topics[n].stats() for n in sorted(self._topics))
        return out

    def queue_names(self) -> list[str]:
        return sorted(self._queues)

    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def subscription_names(self) -> list[str]:
        """Internal queue names of every topic subscription (durable or not)."""
        return sorted(name for topic in self._topics.values() for name in topic.subscriptions)

    def create_queue(self, name: str, *, ring_size: int | None = None) -> None:
        """Create queue ``name`` now (even with auto-create off), optionally with its own
        ``ring_size`` (seed 000: a per-queue value beats ``default_ring_size``). An
        existing queue only gets the ring size."""
        q = self._queues.get(name) or self._new_queue(name)
        if ring_size is not None:
            q.set_ring_size(ring_size)

    def set_ring_size(self, name: str, ring_size: int | None) -> None:
        """Change a queue's ring size at run time (None: back to its settings). Lowering
        it deletes nothing now; sends evict one for one until consumption shrinks it."""
        q = self._queues.get(name)
        if q is None:
            raise DestinationNotFound(f"no queue named {name!r}; see queue_names()")
        q.set_ring_size(ring_size)

    def settings_for(self, name: str) -> AddressSettings:
        return self._settings.match(name)

    def set_settings(self, pattern: str, settings: AddressSettings) -> None:
        """Change settings at run time; existing destinations pick the change up now."""
        self._settings.set(pattern, settings)
        for q in list(self._queues.values()):
            q.apply_settings(self._settings.match(q.address))
        for t in list(self._topics.values()):
            t.apply_settings(self._settings.match(t.name))

    def process_timers(self) -> None:
        """Expire and release scheduled messages that are due by the clock."""
        now = self._clock()
        heap = self._timers
        due: dict[Queue, list[MessageRef]] = {}
        while heap and heap[0][0] <= now:
            _, _, kind, queue, ref = heapq.heappop(heap)
            if queue.timer_due(kind, ref):
                due.setdefault(queue, []).append(ref)
        for queue, refs in due.items():
            queue.release(refs)

    def next_deadline(self) -> int | None:
        """Clock time (ms) at which ``process_timers`` next has work, or None."""
        heap = self._timers
        while heap and not heap[0][3].is_live(heap[0][2], heap[0][4]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def close(self) -> None:
        """Close every connection (telling hosts their consumers are gone) and the store."""
        if self.closed:
            return
        for conn in list(self._connections.values()):
            for cid in conn.consumer_ids():
                conn.callback.consumer_closed(cid, f"broker {self.name!r} is shutting down")
            conn.close()
        self.closed = True
        self._timers.clear()
        if self.store is not None:
            self.store.close()

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self.closed:
            raise IllegalBrokerState(
                f"broker {self.name!r} is closed; create a new Broker to continue"
            )

    def _batch(self) -> contextlib.AbstractContextManager[None]:
        if self.store is None:
            return contextlib.nullcontext()
        return self.store.batch()

    def _new_queue(self, name: str, owner_connection: int | None = None) -> Queue:
        q = Queue(
            name,
            self,
            self._settings.match(name),
            durable=owner_connection is None,
            owner_connection=owner_connection,
        )
        self._queues[name] = q
        return q

    def _check_name_length(self, name: str, what: str = "destination") -> None:
        """Refuse a name longer than ``max_destination_length`` before any per-word work
        (settings lookup, wildcard routing) is spent on it."""
        limit = self.max_destination_length
        if len(name) <= limit // 4:  # at most 4 UTF-8 bytes a character: surely short
            return
        size = len(name.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise InvalidDestination(
                f"{what} name of {size} bytes is longer than this broker's "
                f"max-destination-length of {limit} bytes; use a shorter name, or raise the "
                "limit ([limits] max-destination-length in jmspy broker's config, "
                "max_destination_length= for an in-process broker)"
            )

    def _queue(self, name: str, *, create: bool) -> Queue:
        q = self._queues.get(name)
        if q is not None:
            return q
        self._check_name_length(name)
        if name.startswith(TEMP_PREFIX):
            raise DestinationNotFound(
                f"temporary queue {name!r} does not exist (its connection closed or "
                "deleted it); ask the peer for a fresh reply queue"
            )
        if not create or not self._settings.match(name).auto_create:
            raise DestinationNotFound(
                f"queue {name!r} does not exist and auto-create is off for it; create it "
                "in the broker configuration or enable auto_create for a matching pattern"
            )
        return self._new_queue(name)

    def _topic(self, name: str, *, create: bool = True) -> Topic:
        t = self._topics.get(name)
        if t is not None:
            return t
        self._check_name_length(name)
        settings = self._settings.match(name)
        if not create or not settings.auto_create:
            raise DestinationNotFound(
                f"topic {name!r} does not exist and auto-create is off for it; create it "
                "in the broker configuration or enable auto_create for a matching pattern"
            )
        t = Topic(name, settings)
        self._topics[name] = t
        self._wildcards.add(t)
        return t

    def _check_routable(self, message: ServerMessage) -> None:
        """Raise now what routing would raise, without side effects (transactions)."""
        name = message.destination
        if message.kind is DestinationKind.QUEUE:
            if name in self._queues:
                return
            self._check_name_length(name)
            if name.startswith(TEMP_PREFIX) or not self._settings.match(name).auto_create:
                self._queue(name, create=True)  # raises the right error
        else:
            if name not in self._topics:
                self._check_name_length(name)
            if ("*" in name or "#" in name or ">" in name) and is_wildcard(name):
                raise InvalidDestination(
                    f"cannot send to {name!r}: '*', '#' and '>' words make it a wildcard "
                    "pattern, which names no single topic; subscribe with the pattern and "
                    "send to a concrete topic it matches (e.g. 'orders.eu')"
                )
            if name not in self._topics and not self._settings.match(name).auto_create:
                self._topic(name)

    def _route(self, message: ServerMessage, producer: ServerConnection) -> None:
        if message.kind is DestinationKind.QUEUE:
            q = self._queues.get(message.destination)  # _queue(), minus a call when it exists
            if q is None:
                q = self._queue(message.destination, create=True)
            q.enqueue(message)
            return
        topic = self._topics.get(message.destination)
        if topic is None or self._wildcards.is_pattern(message.destination):
            self._check_routable(message)  # raises: unknown and not creatable, or a pattern
            topic = self._topic(message.destination)
        client_id = producer.client_id
        taken = topic.route(message, client_id)
        for wild in self._wildcards.matching(topic.name):
            taken += wild.route(message, client_id)
        if not taken:
            topic.unrouted += 1

    # --- subscriptions

    def _subscription(
        self,
        topic: Topic,
        key: SubscriptionKey | None,
        *,
        queue_name: str,
        name: str | None,
        client_id: str | None,
        durable: bool,
        shared: bool,
        selector: str | None,
        no_local: bool,
        owner_connection: int,
    ) -> Subscription:
        flt = compile_filter(selector)
        q = Queue(
            queue_name,
            self,
            topic.settings,
            kind=DestinationKind.TOPIC,
            address=topic.name,
            durable=durable,
        )
        sub = Subscription(
            queue=q,
            topic=topic.name,
            name=name,
            client_id=client_id,
            durable=durable,
            shared=shared,
            selector=selector,
            filter=flt,
            no_local=no_local,
            owner_connection=owner_connection,
            key=key,
        )
        topic.subscriptions[queue_name] = sub
        self._sub_queues[queue_name] = sub
        if key is not None:
            self._subscriptions[key] = sub
        if durable and self.store is not None:
            self.store.add_subscription(self._record(sub))
        return sub

    @staticmethod
    def _record(sub: Subscription) -> SubscriptionRecord:
        assert sub.name is not None
        return SubscriptionRecord(
            client_id=sub.client_id,
            name=sub.name,
            topic=sub.topic,
            selector=sub.selector,
            no_local=sub.no_local,
            shared=sub.shared,
            queue=sub.queue.name,
        )

    def _delete_subscription(self, sub: Subscription) -> None:
        topic = self._topics.get(sub.topic)
        if topic is not None:
            topic.subscriptions.pop(sub.queue.name, None)
        self._sub_queues.pop(sub.queue.name, None)
        if sub.key is not None and self._subscriptions.get(sub.key) is sub:
            del self._subscriptions[sub.key]
        with self._batch():
            sub.queue.delete()
            if sub.durable and self.store is not None:
                self.store.remove_subscription(sub.queue.name)

    # --- recovery

    def _recover(self, store: Store) -> None:
        """Rebuild durable state. Recovered messages keep their stored delivery count,
        raised to at least 1: the broker cannot know whether a message was delivered
        before the crash, so its next delivery says JMSRedelivered (JMS allows false
        positives, never false negatives)."""
        state = store.load()
        for rec in state.subscriptions:
            topic = self._topics.get(rec.topic)
            if topic is None:  # recreate even when auto-create is off: it existed
                topic = self._topics[rec.topic] = Topic(rec.topic, self._settings.match(rec.topic))
                self._wildcards.add(topic)
            key: SubscriptionKey = ("durable", rec.client_id, rec.name)
            q = Queue(
                rec.queue, self, topic.settings, kind=DestinationKind.TOPIC, address=topic.name
            )
            sub = Subscription(
                queue=q,
                topic=topic.name,
                name=rec.name,
                client_id=rec.client_id,
                durable=True,
                shared=rec.shared,
                selector=rec.selector,
                filter=compile_filter(rec.selector),
                no_local=rec.no_local,
                key=key,
            )
            topic.subscriptions[rec.queue] = sub
            self._sub_queues[rec.queue] = sub
            self._subscriptions[key] = sub
        for qname, messages in state.queues.items():
            owner = self._sub_queues.get(qname)
            if owner is not None:
                q = owner.queue
            else:
                q = self._queues.get(qname) or self._new_queue(qname)
            for stored in messages:
                q.recover(stored.message, max(stored.delivery_count, 1))
