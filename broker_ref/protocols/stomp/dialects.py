"""Which subscription a SUBSCRIBE or UNSUBSCRIBE names, in each dialect the bundled broker
speaks, so code written for another broker keeps its durability here:

* ActiveMQ / Artemis: ``activemq.subscriptionName`` (or ``durable-subscription-name``) on a
  topic names an unshared durable subscription (needs the connection's client id); the
  same header on UNSUBSCRIBE deletes it.
* RabbitMQ: ``durable:true`` + ``auto-delete:false`` on a topic is a durable queue bound to
  it, named by ``x-queue-name`` (else the subscription id), whose consumers compete and
  which needs no client id: in the core, a shared durable subscription of that name;
  UNSUBSCRIBE with the same headers deletes it.
* jmspy (JMS 2.0 ``create_shared_consumer`` / ``create_shared_durable_consumer``):
  ``jmspy-shared-subscription`` / ``jmspy-shared-durable-subscription`` name a shared
  subscription: one copy per name, spread over its consumers on any connection.
"""

from __future__ import annotations

from ...core import DestinationKind
from .refusals import ProtocolError

__all__ = ["subscription_naming", "unsubscribe_naming"]

#: SUBSCRIBE headers naming a shared subscription, and whether it is durable.
_SHARED_HEADERS = (("jmspy-shared-subscription", False),
                   ("jmspy-shared-durable-subscription", True))


def _rabbit_durable(headers: dict[str, str]) -> bool:
    """RabbitMQ's way of asking for (or, on UNSUBSCRIBE, deleting) a durable subscription."""
    return (headers.get("durable", "").lower() == "true"
            and headers.get("auto-delete", "").lower() == "false")


def subscription_naming(
    headers: dict[str, str], kind: DestinationKind, sid: str
) -> tuple[str | None, bool, bool]:
    """(subscription name, durable, shared) of a SUBSCRIBE; (None, False, False) for a
    plain consumer."""
    topic = kind is DestinationKind.TOPIC
    name = headers.get("activemq.subscriptionName") or headers.get("durable-subscription-name")
    if name is not None and not topic:
        raise ProtocolError("durable subscription on a queue", "activemq.subscriptionName "
                            "is only meaningful on /topic/ destinations")
    shared = name is None and topic and _rabbit_durable(headers)
    if shared:
        name = headers.get("x-queue-name") or sid
    durable = name is not None
    for header, is_durable in _SHARED_HEADERS:
        shared_name = headers.get(header)
        if shared_name is not None:
            if not topic or not shared_name:
                raise ProtocolError(f"invalid {header}", f"{header} names a subscription of a "
                                    "/topic/ destination; give it a non-empty name")
            name, shared, durable = shared_name, True, is_durable
    return name, durable, shared


def unsubscribe_naming(headers: dict[str, str], sid: str | None) -> str | None:
    """The durable subscription an UNSUBSCRIBE deletes, if it names one."""
    name = headers.get("activemq.subscriptionName")
    if name is None and _rabbit_durable(headers):
        name = headers.get("x-queue-name") or sid
    return name
