"""Which subscription a topic consumer attaches to: JMS 2.0's rules for non-durable,
durable and shared subscriptions, decided in one place.

A non-durable subscription is new for every consumer. A durable or shared one is found by
its key (kind, client id, name): reused when its topic, selector, ``no_local`` and sharing
mode are the same, refused while it has consumers and differs, and otherwise replaced,
which deletes it and its messages. The connection supplies who asks (its id and client id)
and the check that replacing is allowed: deleting a subscription's messages consumes them,
so it needs ``consume`` on the topic they came from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import IllegalBrokerState, InvalidSubscription
from .topic import Subscription, SubscriptionKey, Topic

if TYPE_CHECKING:
    from .postoffice import PostOffice

__all__ = ["attach_subscription"]


def attach_subscription(
    post_office: PostOffice,
    topic: Topic,
    *,
    connection_id: int,
    client_id: str | None,
    consumer_id: int,
    selector: str | None,
    no_local: bool,
    name: str | None,
    durable: bool,
    shared: bool,
    may_replace: Callable[[str], None],
) -> Subscription:
    """The subscription consumer ``consumer_id`` of connection ``connection_id`` reads.
    ``may_replace(topic)`` raises if the connection may not delete the messages of an
    existing subscription to ``topic`` (a changed durable subscription is replaced)."""
    if not durable and not shared:
        return post_office.subscription(
            topic,
            None,
            queue_name=f"nondurable://{connection_id}.{consumer_id}/{topic.name}",
            name=name,
            client_id=client_id,
            durable=False,
            shared=False,
            selector=selector,
            no_local=no_local,
            owner_connection=connection_id,
        )
    if not name:
        raise InvalidSubscription(
            "a durable or shared subscription needs a subscription name; pass "
            "subscription_name=..."
        )
    if shared and no_local:
        raise InvalidSubscription(
            "no_local is not available on shared subscriptions (JMS 2.0); drop it or "
            "use an unshared subscription"
        )
    if durable and not shared and client_id is None:
        raise InvalidSubscription(
            f"durable subscription {name!r} needs a client id on the connection (it is "
            "identified by client id + name): set client_id when connecting, or use a "
            "shared durable subscription"
        )
    post_office.check_name_length(name, "subscription")
    key: SubscriptionKey = ("durable" if durable else "shared", client_id, name)
    existing = post_office.subscription_named(key)
    if existing is not None:
        same = (
            existing.topic == topic.name
            and existing.selector == selector
            and existing.no_local == no_local
            and existing.shared == shared
        )
        if existing.queue.consumers:
            if not same:
                raise InvalidSubscription(
                    f"subscription {name!r} is in use with a different topic, selector, "
                    "no_local or sharing mode; close its consumers before changing it"
                )
            if not shared:
                raise IllegalBrokerState(
                    f"durable subscription {name!r} already has an active consumer; an "
                    "unshared durable subscription allows one consumer (close it, or "
                    "use a shared durable subscription)"
                )
            return existing
        if same:
            existing.owner_connection = connection_id
            return existing
        # JMS: a changed durable subscription is replaced. Replacing deletes it and its
        # messages, which is consuming them: that needs ``consume`` on the topic they
        # came from, not only on the new one (else a client id is all it takes).
        may_replace(existing.topic)
        post_office.delete_subscription(existing)
    scheme = "sub://" if durable else "shared://"
    queue_name = scheme + (f"{client_id}." if client_id else "") + name
    return post_office.subscription(
        topic,
        key,
        queue_name=queue_name,
        name=name,
        client_id=client_id,
        durable=durable,
        shared=shared,
        selector=selector,
        no_local=no_local,
        owner_connection=connection_id,
    )
