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

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from jmspy.broker_ref.core import twins

from .kinds import BodyType, DestinationKind
from .records import BatchSessionCallback, DeliverMany, Delivery, SessionCallback

if TYPE_CHECKING:
    from .records import ServerMessage
else:
    # The message record is a twin (typed C fields when compiled): see .records.
    ServerMessage = twins.records.ServerMessage

__all__ = [
    "DEAD_LETTER_REASON",
    "ORIGINAL_DESTINATION",
    "TEMP_PREFIX",
    "AddressSettings",
    "BatchSessionCallback",
    "BodyType",
    "ConsumerInfo",
    "CoreConnection",
    "DeliverMany",
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
#: How a temporary queue's name starts (``ServerConnection.create_temporary_queue``).
TEMP_PREFIX = "temp-queue://"


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
    #: The backlog the broker granted (seed 001 ``MaxPerSubscriptionBacklog``: the lower
    #: of what the subscriber asked and the queue's maximum); None = no backlog cap.
    backlog: int | None = None


@dataclass(slots=True)
class DestinationStats:
    """Counters of one destination (for a topic: summed over its subscriptions).

    ``message_count`` counts every message the destination holds that is not yet
    acknowledged: ready, in delivery and scheduled (as Artemis counts it), in RAM or
    paged out; ``paged_count`` is the part that is paged out (on disk, not in RAM).
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
    #: persistent messages the store holds for it (what survives a restart)
    stored_count: int = 0
    #: messages paged out of RAM (seed 002): in the store or the spool file
    paged_count: int = 0
    #: bytes its pending (ready) messages take in RAM, and its ``memory-limit`` (0: none,
    #: only the broker's applies) -- what producer flow control compares (seed 003)
    memory_usage: int = 0
    memory_limit: int = 0
    #: producers (connections) waiting because it, or the broker, is full (seed 003)
    blocked_producers: int = 0
    #: messages a slow subscriber lost to its ``pending-message-limit`` (seed 003)
    discarded: int = 0
    #: messages dropped as duplicates of one its duplicate-id window held (.duplicates)
    duplicates_dropped: int = 0

    @property
    def memory_percent(self) -> int:
        """``memory_usage`` in % of ``memory_limit`` (0 when it has no limit of its own)."""
        return self.memory_usage * 100 // self.memory_limit if self.memory_limit else 0

    @property
    def in_memory_count(self) -> int:
        """Messages held in RAM (``message_count`` minus the paged-out ones)."""
        return self.message_count - self.paged_count

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
            "storedCount": self.stored_count,
            "pagedCount": self.paged_count,
            "inMemoryCount": self.in_memory_count,
            "memoryUsage": self.memory_usage,
            "memoryLimit": self.memory_limit,
            "memoryPercentUsage": self.memory_percent,
            "blockedProducers": self.blocked_producers,
            "discarded": self.discarded,
            "duplicatesDropped": self.duplicates_dropped,
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

    # --- ring queues (seed 000, Artemis) ---------------------------------------------
    #: Fixed size of the queue: adding to the tail of a full queue removes the head-most
    #: ready message (counted in ``messages_replaced``; not dead-lettered). In-delivery and
    #: scheduled messages are not evictable. None = take ``default_ring_size``; -1 = no
    #: ring. A per-queue value (``Broker.create_queue(ring_size=)``) overrides both.
    ring_size: int | None = None
    #: Ring size of queues with no explicit ``ring_size`` (auto-created ones). -1 = none.
    default_ring_size: int = -1

    # --- AMPS-style queue settings (seed 001) ----------------------------------------
    #: How long a consumer owns a delivered, unacknowledged message. When it runs out the
    #: message goes back to the head of the queue (delivery count +1) and may go to any
    #: consumer; the old delivery tag is then "stale" (see ``leasing``). None = forever.
    lease_period_ms: int | None = None
    #: "at-least-once" (a message leaves the queue when acknowledged) or "at-most-once"
    #: (it leaves the queue when sent, like an auto-ack consumer: never redelivered).
    semantics: str = "at-least-once"
    #: The most unacknowledged (leased) messages of the whole queue at once; dispatch
    #: pauses at this many until one is acknowledged, returned or expires. None = no cap.
    #: (AMPS' MaxBacklog is queue-wide; the per-consumer cap is the granted backlog.)
    max_backlog: int | None = None
    #: The most unacknowledged messages one consumer may hold. A consumer asks with
    #: ``create_consumer(backlog=)``; it is granted the lower of that and this value, and
    #: 1 when it asks nothing (the AMPS default). None = no per-queue maximum: a consumer
    #: is granted what it asks (no cap when it asks nothing), so JMS clients are unaffected.
    max_per_subscription_backlog: int | None = None
    #: Queue expiration period (ms from enqueue). None = unlimited. See ``expiration_model``.
    #: Expired messages go to ``expiry_address`` or, when that is unset, to
    #: ``dead_letter_address`` with reason "expired" (AMPS: expired = undeliverable).
    expiration_ms: int | None = None
    #: How queue and message expirations combine: "queue" (queue value only), "latest"
    #: (the later; an unset value is unlimited, so it wins), "earliest" (the earlier of
    #: the set values), "default" (the message's when set, else the queue's). None = the
    #: JMS behaviour (message expiration only, expired messages dropped unless
    #: ``expiry_address``); "default" is used when only ``expiration_ms`` is set.
    expiration_model: str | None = None
    #: A selector: only messages matching it are put on the queue; others are discarded
    #: (not counted as enqueued) — the queue is a filtered view of what is sent to it.
    filter: str | None = None
    #: How messages are shared among consumers that can take them: "fast" (the first
    #: consumer, in creation order), "round-robin" (the next one), "proportional" (the
    #: lowest ratio of unacknowledged messages to granted backlog; ties go round-robin).
    #: None = round-robin (the JMS broker's behaviour; AMPS' own default differs).
    fairness_model: str | None = None
    #: Who may acknowledge a message whose lease expired: "strict" (only while it is
    #: unleased — an ack of it while another consumer holds it is refused with
    #: IllegalBrokerState and has no effect) or "sublet" (any holder of an old tag may
    #: acknowledge it; the current holder's later ack is then a no-op).
    leasing: str = "sublet"
    #: A message delivered this many times is dead-lettered instead of being returned to
    #: the queue (reason "max deliveries (N) exceeded"). 0 = no maximum.
    max_deliveries: int = 0
    #: A message cancelled (returned by a consumer: close, rollback, cancel) this many
    #: times is dead-lettered (reason "max cancels (N) exceeded"). Lease expiries are not
    #: cancels. 0 = no maximum.
    max_cancels: int = 0
    #: A selector marking barrier messages: such a message is held (and holds everything
    #: after it) until every earlier message is acknowledged, then delivered once to every
    #: current consumer — when all of them can receive. Evaluated once, on enqueue.
    barrier_expression: str | None = None
    #: Only the oldest N unacknowledged messages are active: deliverable and browsable;
    #: the rest wait (even if a selector would match them). AMPS minimum 1000.
    target_queue_depth: int | None = None

    # --- resources (seed 003, ActiveMQ's policy entries) --------------------------------
    #: RAM the destination's pending messages may take, in bytes (the config file takes
    #: "10 MB", "512 KB"); a topic's is the sum over its subscriptions. Past it producers
    #: wait (``producer_flow_control``). None = only the broker's ``memory-limit`` applies.
    memory_limit: int | None = None
    #: True (ActiveMQ's default): a send to a destination whose memory, or the broker's,
    #: is full waits until consumers free some (or fails: ``send-fail-if-no-space``); a
    #: persistent message for a durable queue pages to the store instead and never waits
    #: for memory. False: nothing waits for memory; backlogs past the RAM budget are
    #: spooled to temp files under ``temp-limit`` (the seed's slow-consumer case).
    producer_flow_control: bool = True
    #: ActiveMQ's constantPendingMessageLimitStrategy: a non-durable topic subscription
    #: keeps at most this many pending messages beyond its prefetch; sending one more
    #: discards the oldest (counted in ``discarded``). None = keep all.
    pending_message_limit: int | None = None
    #: Duplicate detection (Artemis's ``id-cache-size``): how many ``_AMQ_DUPL_ID`` values
    #: of recent messages the address remembers; a message whose id is among them is
    #: dropped (:mod:`.duplicates`; persistent messages' ids are kept in the store, across
    #: restarts). 0 = no detection. A million: a Spark job's rows each carry one.
    duplicate_id_cache_size: int = 1_000_000
    #: ...and for how long at most, in milliseconds (0 = no age limit; default 7 days).
    duplicate_id_max_age_ms: int = 7 * 24 * 3600 * 1000

    def __post_init__(self) -> None:
        for name, allowed in _CHOICES.items():
            value = getattr(self, name)
            if value is not None and value not in allowed:
                raise ValueError(
                    f"address setting {name} = {value!r} is not one of {sorted(allowed)}"
                )
        if type(self.duplicate_id_cache_size) is not int or self.duplicate_id_cache_size < 0:
            raise ValueError("address setting duplicate_id_cache_size must be an int >= 0 "
                             f"(0 = off), got {self.duplicate_id_cache_size!r}")
        if type(self.duplicate_id_max_age_ms) is not int or self.duplicate_id_max_age_ms < 0:
            raise ValueError("address setting duplicate_id_max_age_ms must be an int >= 0 "
                             f"(0 = no age limit), got {self.duplicate_id_max_age_ms!r}")
        for name in ("ring_size", "default_ring_size"):
            value = getattr(self, name)
            if value is not None and (value < -1 or value == 0):
                raise ValueError(
                    f"address setting {name} must be -1 (no ring) or >= 1, got {value}"
                )
        for name in ("lease_period_ms", "max_backlog", "max_per_subscription_backlog",
                     "memory_limit", "pending_message_limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"address setting {name} must be >= 1 or unset, got {value}")
        if self.target_queue_depth is not None:
            if self.target_queue_depth < 1000:
                raise ValueError(
                    f"address setting target_queue_depth must be >= 1000 (AMPS minimum), "
                    f"got {self.target_queue_depth}"
                )
            if self.barrier_expression is not None:
                raise ValueError(
                    "address settings target_queue_depth and barrier_expression cannot be "
                    "combined (AMPS forbids it): drop one of them"
                )

    @property
    def amps(self) -> bool:
        """True when any AMPS-style setting that changes dispatch is set."""
        return (
            self.lease_period_ms is not None
            or self.semantics != "at-least-once"
            or self.max_backlog is not None
            or self.expiration_ms is not None
            or self.expiration_model is not None
            or self.filter is not None
            or self.fairness_model is not None
            or self.max_deliveries > 0
            or self.max_cancels > 0
            or self.barrier_expression is not None
            or self.target_queue_depth is not None
        )


_CHOICES: dict[str, frozenset[str]] = {
    "semantics": frozenset({"at-least-once", "at-most-once"}),
    "expiration_model": frozenset({"queue", "latest", "earliest", "default"}),
    "fairness_model": frozenset({"fast", "round-robin", "proportional"}),
    "leasing": frozenset({"strict", "sublet"}),
}


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
        backlog: int | None = None,
    ) -> ConsumerInfo:
        """Attach a consumer; it gets nothing until credit is granted.

        ``backlog`` asks for the most unacknowledged messages this consumer will hold
        (seed 001 MaxPerSubscriptionBacklog); ``ConsumerInfo.backlog`` says what was
        granted.

        For topics: ``subscription_name`` with ``durable``/``shared`` select a durable,
        shared or shared-durable subscription (JMS 2.0 rules: an unshared durable
        subscription is keyed by client id + name). ``auto_ack`` makes delivery count as
        acknowledgement (at-most-once, JMS NO_ACKNOWLEDGE).
        """

    def grant_credit(self, consumer_id: int, credits: int) -> None:
        """Allow ``credits`` more deliveries to the consumer; delivers at once if possible."""

    def revoke_credit(self, consumer_id: int) -> int:
        """Take back all unused credit (a pull that timed out); returns how many."""

    def credit(self, consumer_id: int) -> int:
        """The consumer's unused credit (0 once it is closed), without taking it."""

    def ack(self, delivery_tags: list[int], tx: str | None = None) -> None:
        """Acknowledge deliveries: the messages are consumed (or staged in ``tx``)."""

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True,
               unseen: Collection[int] = ()) -> None:
        """Return unacknowledged deliveries to the head of their queue, in reverse order.

        The next delivery of each has ``delivery_count`` one higher; a message past its
        ``max_delivery_attempts`` is dead-lettered instead. ``redelivered=False`` means the
        client never showed the message to the application (it was only prefetched): the
        count is not raised. ``unseen`` names the tags of a marked hand-back that are such
        prefetched ones (Open MQ's redeliver with "delivered" flags): one call keeps the
        queue's order for a batch of both kinds.
        """

    def close_consumer(self, consumer_id: int, *, unseen: Collection[int] = ()) -> None:
        """Detach a consumer; its unacknowledged deliveries are cancelled (redelivered),
        but for the tags in ``unseen``, which its client never showed the application
        (see :meth:`cancel`)."""

    def unsubscribe(self, subscription_name: str) -> None:
        """Delete a durable subscription (error if it has an active consumer)."""

    def begin(self, tx: str) -> None: ...
    def commit(self, tx: str) -> None: ...
    def rollback(self, tx: str) -> None:
        """Drop staged sends; acks staged in ``tx`` become cancels (redelivered)."""

    def browse(self, destination: str, selector: str | None = None) -> list[ServerMessage]:
        """A snapshot of a queue's ready messages in delivery order, without consuming."""

    def create_temporary_queue(self) -> str:
        """Create a queue that lives as long as this connection; returns its name."""

    def delete_temporary_queue(self, name: str) -> None: ...

    def close(self) -> None:
        """Close every consumer (cancelling their deliveries), roll back open
        transactions, delete temporary queues and non-durable subscriptions."""
