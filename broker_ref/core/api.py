"""The narrow interface between the broker core and whatever hosts it.

Everything a host (the in-process ``vm`` transport, the STOMP server) needs from the core
is named here; everything the core needs from a host is the :class:`SessionCallback`.
This mirrors ActiveMQ Artemis, whose server core knows nothing of the wire: deliveries go
out through a session callback and are paced by credits the consumer grants.

Rules every host relies on:

* The core does no I/O and starts no threads. It is **not** thread-safe: a host serialises
  every call into one :class:`~jmspy.broker_ref.core.broker.Broker` (one lock, or one event
  loop).
* Time comes from the broker's injected clock (milliseconds). Expiry and scheduled
  delivery happen when the host calls ``Broker.process_timers()``; ``Broker.next_deadline()``
  says when that is next due.
* ``SessionCallback.deliver`` is called synchronously from inside core calls (a send, a
  credit grant, an ack that frees a slot...). It must only hand the delivery over (append
  to a buffer, write to a socket buffer) and must never call back into the broker.
* A consumer receives at most as many deliveries as it was granted credits, and never
  more than ``consumer_flow_limit`` of the destination unacknowledged at once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "DEAD_LETTER_REASON",
    "ORIGINAL_DESTINATION",
    "AddressSettings",
    "BodyType",
    "ConsumerInfo",
    "CoreConnection",
    "Delivery",
    "DestinationKind",
    "DestinationStats",
    "ServerMessage",
    "SessionCallback",
]

#: Header/property set on a dead-lettered message saying why it was dead-lettered.
DEAD_LETTER_REASON = "JMS_jmspy_DeadLetterReason"
#: Property holding the destination a dead-lettered or expired message first went to.
ORIGINAL_DESTINATION = "JMS_jmspy_OriginalDestination"


class DestinationKind(enum.Enum):
    QUEUE = "queue"
    TOPIC = "topic"


class BodyType(enum.Enum):
    MESSAGE = "message"  # no body
    TEXT = "text"
    BYTES = "bytes"
    MAP = "map"


@dataclass(slots=True)
class ServerMessage:
    """A message as the broker holds it: plain data, no client-side behaviour.

    Times are integer milliseconds since the epoch from the broker's clock; 0 means "not
    set" for ``expiration`` and ``deliver_at``. ``properties`` values are ``None``, bool,
    int, float or str (the JMS property types). ``size`` is the approximate size in bytes,
    used for memory accounting.
    """

    message_id: str
    kind: DestinationKind
    destination: str
    body_type: BodyType = BodyType.MESSAGE
    body: str | bytes | dict[str, Any] | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    persistent: bool = True
    priority: int = 4
    timestamp: int = 0
    expiration: int = 0
    deliver_at: int = 0
    correlation_id: str | None = None
    reply_to: tuple[DestinationKind, str] | None = None
    jms_type: str | None = None
    producer_connection: int = 0  # ServerConnection id, for no_local
    size: int = 0


@dataclass(slots=True)
class Delivery:
    """One delivery of a message to one consumer.

    ``delivery_tag`` is unique within the connection and is what acks and cancels name.
    ``delivery_count`` is 1 on first delivery and grows each time the message is
    redelivered (JMSXDeliveryCount); JMSRedelivered is ``delivery_count > 1``.
    """

    consumer_id: int
    delivery_tag: int
    message: ServerMessage
    delivery_count: int


@dataclass(slots=True, frozen=True)
class ConsumerInfo:
    """What the broker answers to a new consumer.

    ``destination_flow_limit`` is the destination's ``consumerFlowLimit`` (None when the
    destination sets none); the client's effective limit is the lower of its own and this.
    ``subscription`` names the queue the consumer really reads from (a topic subscription's
    internal queue, or the queue itself).
    """

    consumer_id: int
    destination_flow_limit: int | None
    subscription: str


@dataclass(slots=True)
class DestinationStats:
    """Counters of one destination (for a topic: summed over its subscriptions).

    ``message_count`` counts every message the destination holds that is not yet
    acknowledged: ready, in delivery and scheduled (as Artemis counts it).
    """

    name: str
    kind: DestinationKind
    message_count: int = 0
    delivering_count: int = 0
    scheduled_count: int = 0
    consumer_count: int = 0
    enqueued: int = 0
    dequeued: int = 0  # acknowledged
    expired: int = 0
    dead_lettered: int = 0
    messages_replaced: int = 0  # ring queues (issue 3); 0 otherwise
    subscription_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The counters under their JMX-style names (messageCount, deliveringCount...)."""
        return {
            "name": self.name,
            "kind": self.kind.value,
            "messageCount": self.message_count,
            "deliveringCount": self.delivering_count,
            "scheduledCount": self.scheduled_count,
            "consumerCount": self.consumer_count,
            "enqueued": self.enqueued,
            "dequeued": self.dequeued,
            "expired": self.expired,
            "deadLettered": self.dead_lettered,
            "messagesReplaced": self.messages_replaced,
            "subscriptionCount": self.subscription_count,
        }


@dataclass(slots=True)
class AddressSettings:
    """Per-destination settings, matched to destination names by wildcard patterns.

    ``consumer_flow_limit`` is Open MQ's destination ``consumerFlowLimit``: the most
    messages the broker keeps delivered-but-unacknowledged on one consumer, whatever the
    client asks for. ``max_delivery_attempts``: after this many deliveries a message that
    is cancelled again goes to ``dead_letter_address`` (0 = never). Expired messages go to
    ``expiry_address`` when set, else they are dropped and counted.
    """

    consumer_flow_limit: int | None = None
    max_delivery_attempts: int = 10
    dead_letter_address: str | None = "DLQ"
    expiry_address: str | None = None
    auto_create: bool = True


class SessionCallback(Protocol):
    """What the core calls on its host. Implementations must not block or re-enter."""

    def deliver(self, delivery: Delivery) -> None:
        """Hand one delivery to the consumer ``delivery.consumer_id``."""

    def consumer_closed(self, consumer_id: int, reason: str) -> None:
        """The broker closed the consumer on its own (its destination was deleted...)."""


class CoreConnection(Protocol):
    """One client connection inside the broker (``Broker.connect()`` returns it).

    Consumer ids are chosen by the host and are unique within the connection. Transaction
    ids (``tx``) are chosen by the host too; ``None`` means "not in a transaction".
    """

    @property
    def connection_id(self) -> int: ...

    def send(self, message: ServerMessage, tx: str | None = None) -> None:
        """Route a message to its destination (or stage it in ``tx``).

        Raises :class:`~jmspy.broker_ref.core.errors.BrokerError` subclasses on refusal.
        """

    def create_consumer(
        self,
        consumer_id: int,
        kind: DestinationKind,
        destination: str,
        *,
        selector: str | None = None,
        no_local: bool = False,
        subscription_name: str | None = None,
        durable: bool = False,
        shared: bool = False,
        auto_ack: bool = False,
        credit: int = 0,
    ) -> ConsumerInfo:
        """Attach a consumer; it gets nothing until credit is granted.

        For topics: ``subscription_name`` with ``durable``/``shared`` select a durable,
        shared or shared-durable subscription (JMS 2.0 rules: an unshared durable
        subscription is keyed by client id + name). ``auto_ack`` makes delivery count as
        acknowledgement (at-most-once, JMS NO_ACKNOWLEDGE).
        """

    def grant_credit(self, consumer_id: int, credits: int) -> None:
        """Allow ``credits`` more deliveries to the consumer; delivers at once if possible."""

    def revoke_credit(self, consumer_id: int) -> int:
        """Take back all unused credit (a pull that timed out); returns how many."""

    def ack(self, delivery_tags: list[int], tx: str | None = None) -> None:
        """Acknowledge deliveries: the messages are consumed (or staged in ``tx``)."""

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True) -> None:
        """Return unacknowledged deliveries to the head of their queue, in reverse order.

        The next delivery of each has ``delivery_count`` one higher; a message past its
        ``max_delivery_attempts`` is dead-lettered instead. ``redelivered=False`` means the
        client never showed the message to the application (it was only prefetched): the
        count is not raised.
        """

    def close_consumer(self, consumer_id: int) -> None:
        """Detach a consumer; its unacknowledged deliveries are cancelled (redelivered)."""

    def unsubscribe(self, subscription_name: str) -> None:
        """Delete a durable subscription (error if it has an active consumer)."""

    def begin(self, tx: str) -> None: ...
    def commit(self, tx: str) -> None: ...
    def rollback(self, tx: str) -> None:
        """Drop staged sends; acks staged in ``tx`` become cancels (redelivered)."""

    def browse(
        self, destination: str, selector: str | None = None
    ) -> list[ServerMessage]:
        """A snapshot of a queue's ready messages in delivery order, without consuming."""

    def create_temporary_queue(self) -> str:
        """Create a queue that lives as long as this connection; returns its name."""

    def delete_temporary_queue(self, name: str) -> None: ...

    def close(self) -> None:
        """Close every consumer (cancelling their deliveries), roll back open
        transactions, delete temporary queues and non-durable subscriptions."""
