"""Topics (multicast) and their subscriptions.

A topic holds no messages itself: routing copies a *reference* to each subscription's own
:class:`~.queue.Queue`, so every subscription has independent order, credit, expiry and
dead-lettering — the Artemis model (an address with one queue per subscription).

The subscription's selector is applied here, when a message is routed (JMS: a durable
subscriber's selector decides what the subscription *keeps*), not at dispatch time.
``no_local`` drops messages sent on the subscribing connection — and, for an unshared
durable subscription, on any connection with the same client id (JMS 2.0).

A message sent to a topic with no subscriptions is dropped: it is counted in
``Topic.unrouted``, not in any ``enqueued`` (a topic's stats are the sums over its
subscriptions, so ``enqueued`` counts one per subscription reached).

Wildcard subscriptions (ActiveMQ / Artemis style, the same syntax as address settings:
``.`` separates words, ``*`` is one word, ``#`` or ``>`` any number): a subscription on
``orders.*`` lives on a :class:`Topic` named by the pattern, and the broker routes every
message sent to a concrete topic that the pattern matches to it too, once (see
:class:`WildcardRoutes`). Sending *to* a pattern is refused: it names no one topic.

Under a security policy a wildcard subscription is *bounded by its readers* (see
:meth:`Subscription.admits`): a message sent to a concrete topic reaches it only when every
user attached to it may ``consume`` that concrete topic. Subscribing with a pattern
therefore never reaches further than subscribing to each topic by name would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .api import AddressSettings, DestinationKind, DestinationStats, ServerMessage
from .queue import Filter, Queue, filter_accepts
from .settings import is_wildcard, pattern_matches

__all__ = ["Subscription", "SubscriptionKey", "Topic", "WildcardRoutes"]

#: Most concrete topic names a wildcard subscription remembers a decision for.
_ADMITTED_LIMIT = 4096

#: (flavour, client id or None, name); flavour is "durable" or "shared".
SubscriptionKey = tuple[str, str | None, str]


@dataclass(slots=True, eq=False)
class Subscription:
    queue: Queue
    topic: str
    name: str | None
    client_id: str | None
    durable: bool
    shared: bool
    selector: str | None
    filter: Filter | None
    no_local: bool
    #: Connection whose messages no_local drops (the subscribing connection; for a
    #: durable subscription, the one currently attached, 0 when none).
    owner_connection: int = 0
    key: SubscriptionKey | None = None
    #: Wildcard subscriptions under security: the principals attached to it (the last
    #: ones, while none is) and the policy's ``may consume this topic`` question.
    readers: tuple[Any, ...] = ()
    may_read: Callable[[Any, str], bool] | None = None
    #: concrete topic name -> admitted, asked once per name (routing is per message)
    _admitted: dict[str, bool] = field(default_factory=dict)

    def bound_readers(
        self, principal: Any, may_read: Callable[[Any, str], bool], *, alone: bool
    ) -> None:
        """Bound what the subscription receives by ``principal``'s right to consume each
        concrete topic: ``alone`` (nobody else attached now) replaces the readers, else
        ``principal`` joins them, so a shared subscription delivers only what *every*
        attached user may read."""
        if alone:
            self.readers = (principal,)
        elif principal not in self.readers:
            self.readers = (*self.readers, principal)
        self.may_read = may_read
        self._admitted.clear()

    def admits(self, topic: str) -> bool:
        """Whether a message sent to the concrete ``topic`` may reach this subscription."""
        may_read = self.may_read
        if may_read is None:
            return True
        hit = self._admitted.get(topic)
        if hit is None:
            hit = all(may_read(p, topic) for p in self.readers)
            if len(self._admitted) >= _ADMITTED_LIMIT:  # many topic names: start over
                self._admitted.clear()
            self._admitted[topic] = hit
        return hit

    def wants(self, message: ServerMessage, producer_client_id: str | None) -> bool:
        if self.may_read is not None and not self.admits(message.destination):
            return False
        if self.no_local and (
            message.producer_connection == self.owner_connection
            or (
                self.durable and self.client_id is not None and producer_client_id == self.client_id
            )
        ):
            return False
        return self.filter is None or filter_accepts(self.filter, message)


class Topic:
    __slots__ = ("name", "settings", "subscriptions", "unrouted")

    def __init__(self, name: str, settings: AddressSettings) -> None:
        self.name = name
        self.settings = settings
        #: subscription queue name -> subscription, in creation order
        self.subscriptions: dict[str, Subscription] = {}
        self.unrouted = 0

    def route(self, message: ServerMessage, producer_client_id: str | None) -> int:
        """Give the message to every interested subscription; returns how many took it.

        Does not count ``unrouted``: with wildcard subscriptions only the broker knows
        whether *any* topic took the message.
        """
        taken = 0
        for sub in self.subscriptions.values():
            if sub.wants(message, producer_client_id):
                sub.queue.enqueue(message)
                taken += 1
        return taken

    def apply_settings(self, settings: AddressSettings) -> None:
        self.settings = settings
        for sub in self.subscriptions.values():
            sub.queue.apply_settings(settings)

    def stats(self) -> DestinationStats:
        out = DestinationStats(name=self.name, kind=DestinationKind.TOPIC)
        for sub in self.subscriptions.values():
            q = sub.queue.stats()
            out.message_count += q.message_count
            out.delivering_count += q.delivering_count
            out.scheduled_count += q.scheduled_count
            out.consumer_count += q.consumer_count
            out.enqueued += q.enqueued
            out.dequeued += q.dequeued
            out.expired += q.expired
            out.dead_lettered += q.dead_lettered
            out.messages_replaced += q.messages_replaced
            out.paged_count += q.paged_count
            out.memory_usage += q.memory_usage
            out.discarded += q.discarded
        # every subscription's queue knows the topic's limit (its settings' or the
        # broker's default share of a destination)
        first = next(iter(self.subscriptions.values()), None)
        out.memory_limit = (first.queue.memory_limit if first is not None
                            else self.settings.memory_limit or 0)
        out.subscription_count = len(self.subscriptions)
        return out


class WildcardRoutes:
    """Which wildcard topics a concrete topic name's messages also go to.

    The answer per name is cached (routing is per message, new patterns are rare); adding
    a pattern clears the cache (topics are never deleted). With no patterns at all,
    routing pays one truth test.
    """

    __slots__ = ("_cache", "_patterns")

    def __init__(self) -> None:
        self._patterns: dict[str, Topic] = {}
        self._cache: dict[str, tuple[Topic, ...]] = {}

    def add(self, topic: Topic) -> None:
        if is_wildcard(topic.name):
            self._patterns[topic.name] = topic
            self._cache.clear()

    def is_pattern(self, name: str) -> bool:
        return name in self._patterns

    def matching(self, name: str) -> tuple[Topic, ...]:
        if not self._patterns:
            return ()
        hit = self._cache.get(name)
        if hit is None:
            hit = tuple(t for p, t in self._patterns.items() if pattern_matches(p, name))
            if len(self._cache) >= 4096:
                self._cache.clear()
            self._cache[name] = hit
        return hit
