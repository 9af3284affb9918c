"""The post office: where messages go (ActiveMQ Artemis' ``PostOffice``).

It owns the broker's addresses: queues, topics (and the wildcard patterns subscribed to),
and topic subscriptions by key and by queue name; it routes a message to them and creates
what auto-create allows. Connections reach destinations only through it, so the broker's
other state (connections, timers, the store's life) stays the broker's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from ..store.store import Store, SubscriptionRecord
from .api import TEMP_PREFIX, AddressSettings, DestinationKind, ServerMessage
from .duplicates import DUPLICATE_ID, DuplicateIds
from .errors import DestinationNotFound, InvalidDestination
from .queue import Queue, QueueHost, compile_filter
from .settings import SettingsRegistry, is_wildcard
from .topic import Subscription, SubscriptionKey, Topic, WildcardRoutes

__all__ = ["PostOffice"]


class PostOffice:
    """Queues, topics and subscriptions by name, and routing between them."""

    def __init__(
        self,
        host: QueueHost[Queue],
        settings: SettingsRegistry,
        store: Store | None,
        max_destination_length: int,
    ) -> None:
        self._host = host
        self._settings = settings
        self._store = store
        #: longest destination (or subscription) name accepted, in UTF-8 bytes
        self.max_destination_length = max_destination_length
        self._queues: dict[str, Queue] = {}
        #: The queues by name, read-only (a send looks its queue up here; the dict itself,
        #: typed read-only: a proxy's ``get`` costs a method call per send).
        self.queues: Mapping[str, Queue] = self._queues
        self._topics: dict[str, Topic] = {}
        #: The topics by name, read-only.
        self.topics: Mapping[str, Topic] = self._topics
        #: topics named by a wildcard pattern, which concrete topics' messages also reach
        self._wildcards = WildcardRoutes()
        #: durable and shared subscriptions by key; subscription queue name -> subscription
        self._subscriptions: dict[SubscriptionKey, Subscription] = {}
        self._sub_queues: dict[str, Subscription] = {}
        #: recent duplicate ids per address, and what they dropped
        self.duplicates = DuplicateIds(store)

    def settings_for(self, name: str) -> AddressSettings:
        return self._settings.match(name)

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """One store batch (nothing without a store)."""
        if self._store is None:
            return contextlib.nullcontext()
        return self._store.batch()

    # --- queues and topics

    def new_queue(self, name: str, owner_connection: int | None = None) -> Queue:
        q = Queue(
            name,
            self._host,
            self._settings.match(name),
            durable=owner_connection is None,
            owner_connection=owner_connection,
        )
        self._queues[name] = q
        return q

    def remove_queue(self, name: str) -> None:
        """Forget queue ``name`` (its owner deleted it)."""
        self._queues.pop(name, None)

    def check_name_length(self, name: str, what: str = "destination") -> None:
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

    def queue(self, name: str, *, create: bool) -> Queue:
        q = self._queues.get(name)
        if q is not None:
            return q
        self.check_name_length(name)
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
        return self.new_queue(name)

    def topic(self, name: str, *, create: bool = True) -> Topic:
        t = self._topics.get(name)
        if t is not None:
            return t
        self.check_name_length(name)
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

    def check_routable(self, message: ServerMessage) -> None:
        """Raise now what routing would raise, without side effects (transactions)."""
        name = message.destination
        if message.kind is DestinationKind.QUEUE:
            if name in self._queues:
                return
            self.check_name_length(name)
            if name.startswith(TEMP_PREFIX) or not self._settings.match(name).auto_create:
                self.queue(name, create=True)  # raises the right error
        else:
            if name not in self._topics:
                self.check_name_length(name)
            if ("*" in name or "#" in name or ">" in name) and is_wildcard(name):
                raise InvalidDestination(
                    f"cannot send to {name!r}: '*', '#' and '>' words make it a wildcard "
                    "pattern, which names no single topic; subscribe with the pattern and "
                    "send to a concrete topic it matches (e.g. 'orders.eu')"
                )
            if name not in self._topics and not self._settings.match(name).auto_create:
                self.topic(name)

    def route(self, message: ServerMessage, client_id: str | None) -> None:
        """Deliver ``message`` to its queue, or to every subscription of its topic (and
        of the wildcard patterns that match it); ``client_id``: the producer's (no_local).
        A message whose duplicate id the address has seen is dropped (.duplicates).
        """
        dup_id = message.properties.get(DUPLICATE_ID)
        if dup_id is not None:
            settings = self._settings.match(message.destination)
            size, age = settings.duplicate_id_cache_size, settings.duplicate_id_max_age_ms
            now = self._host.now()
            if self.duplicates.seen(message.destination, dup_id, size, now, age):
                return
            self._route(message, client_id)
            # only once routed: a send that failed leaves no id to drop its retry
            self.duplicates.remember(message.destination, dup_id, size, now, age,
                                     message.persistent)
            return
        self._route(message, client_id)

    def _route(self, message: ServerMessage, client_id: str | None) -> None:
        if message.kind is DestinationKind.QUEUE:
            q = self._queues.get(message.destination)  # _queue(), minus a call when it exists
            if q is None:
                q = self.queue(message.destination, create=True)
            q.enqueue(message)
            return
        topic = self._topics.get(message.destination)
        if topic is None or self._wildcards.is_pattern(message.destination):
            self.check_routable(message)  # raises: unknown and not creatable, or a pattern
            topic = self.topic(message.destination)
        taken = topic.route(message, client_id)
        for wild in self._wildcards.matching(topic.name):
            taken += wild.route(message, client_id)
        if not taken:
            topic.unrouted += 1

    def subscription_queues(self, topic_name: str) -> list[Queue]:
        """The queues a message sent to topic ``topic_name`` would reach (its own
        subscriptions' and those of the wildcard patterns that match it), selectors and
        no_local aside."""
        topic = self._topics.get(topic_name)
        out = [] if topic is None else [s.queue for s in topic.subscriptions.values()]
        if self._wildcards.is_pattern(topic_name):
            return out
        for wild in self._wildcards.matching(topic_name):
            out.extend(s.queue for s in wild.subscriptions.values())
        return out

    # --- subscriptions

    def subscription_named(self, key: SubscriptionKey) -> Subscription | None:
        return self._subscriptions.get(key)

    def subscription_of_queue(self, queue_name: str) -> Subscription | None:
        return self._sub_queues.get(queue_name)

    def subscription(
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
            self._host,
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
        if durable and self._store is not None:
            self._store.add_subscription(self._record(sub))
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

    def delete_subscription(self, sub: Subscription) -> None:
        topic = self._topics.get(sub.topic)
        if topic is not None:
            topic.subscriptions.pop(sub.queue.name, None)
        self._sub_queues.pop(sub.queue.name, None)
        if sub.key is not None and self._subscriptions.get(sub.key) is sub:
            del self._subscriptions[sub.key]
        with self.batch():
            sub.queue.delete()
            if sub.durable and self._store is not None:
                self._store.remove_subscription(sub.queue.name)

    # --- recovery

    def recover(self, store: Store) -> None:
        """Rebuild durable state. Stored messages stay on disk until consumers need them
        (``Queue.recover``); they come back marked redelivered (``PageRun.delivery_count``
        says why)."""
        state = store.load()
        self.duplicates.recover(store.load_duplicate_ids())
        for rec in state.subscriptions:
            topic = self._topics.get(rec.topic)
            if topic is None:  # recreate even when auto-create is off: it existed
                topic = self._topics[rec.topic] = Topic(rec.topic, self._settings.match(rec.topic))
                self._wildcards.add(topic)
            key: SubscriptionKey = ("durable", rec.client_id, rec.name)
            q = Queue(rec.queue, self._host, topic.settings, kind=DestinationKind.TOPIC,
                      address=topic.name)
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
        for qname, runs in state.runs.items():
            owner = self._sub_queues.get(qname)
            if owner is not None:
                q = owner.queue
            else:
                q = self._queues.get(qname) or self.new_queue(qname)
            q.recover(runs)
