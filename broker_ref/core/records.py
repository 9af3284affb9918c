"""The records the broker runs on: a message, its place in a queue, a consumer, a
connection's delivery channel, and the fields of a queue, a connection and the producer
flow that the per-message paths read (pure twin).

Plain slotted classes with no behaviour beyond ``can_receive`` and ``free_for``: what
happens to them is :mod:`.queue`'s (dispatch), :mod:`.connection`'s (sends, acks,
transactions) and :mod:`.producer_flow`'s. The compiled twin
declares the same records as ``cdef class``\\ es with typed fields in
``jmspy/_cext/records.pxd`` (implemented in ``cython_ext/records.pyx``), so that the
compiled twins (the dispatch loop ``cython_ext/queue_run.pyx``, the message conversion
``cython_ext/vm_convert.pyx``) read and write them as C
fields: that typed access, not compilation as such, is what makes them faster.
:mod:`.consumer` and :mod:`.api` hand out one twin or the other;
``tests/test_records_twins.py`` holds them to the same fields, defaults and behaviour.
Change one, change the other.

The state numbers and the number of priority levels are defined here, once; the compiled
twins read them from this module when they are imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from .kinds import BodyType, DestinationKind

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from .errors import BrokerError
    from .filters import Filter

__all__ = [
    "DELIVERING",
    "GONE",
    "LEVEL_SLACK",
    "PAGE_OVERHEAD",
    "PRIORITIES",
    "READY",
    "SCHEDULED",
    "BrokerState",
    "ConnectionRecord",
    "DeliveryChannel",
    "FlowRecord",
    "Level",
    "LevelsRecord",
    "MessageRef",
    "PageBudget",
    "QueueRecord",
    "QueueRef",
    "ServerConsumer",
    "ServerMessage",
    "SpoolUse",
    "priority_level",
]

#: MessageRef.state values
READY: Final = 0
SCHEDULED: Final = 1
DELIVERING: Final = 2
GONE: Final = 3
#: Number of JMS priority levels: a queue keeps one :class:`Level` per level.
PRIORITIES: Final = 10


def priority_level(priority: int) -> int:
    """The index of a JMS priority's level in a queue (0 = highest, delivered first);
    priorities outside 0..9 count as the nearest of them."""
    if priority < 0:
        return PRIORITIES - 1
    return 0 if priority >= PRIORITIES else PRIORITIES - 1 - priority


#: Taken slots a :class:`Level` may keep before it drops them: a level that fills and
#: drains one message at a time keeps its list's storage instead of freeing it and making
#: it again per message (a drained level holds at most this many None slots).
LEVEL_SLACK: Final = 16

#: Bytes a ready message costs in RAM beyond its ``size`` (its ref, the message object and
#: its header fields), in the paging budget's accounting.
PAGE_OVERHEAD: Final = 256


@dataclass(slots=True)
class ServerMessage:
    """A message as the broker holds it: plain data, no client-side behaviour.

    Times are integer milliseconds since the epoch from the broker's clock; 0 means "not
    set" for ``expiration`` and ``deliver_at``. ``properties`` values are ``None``, bool,
    int, float or str (the JMS property types). ``size`` is the approximate size in bytes,
    used for memory accounting.

    The compiled twin is a Cython dataclass: the same constructor, equality, repr and
    ``dataclasses.replace``/``fields``. Import it from :mod:`.api`, which hands out the
    running twin. Set fields, never delete them: the compiled twin's code (its generated
    methods, the conversions) reads them without checking (``jmspy/_cext/members.pxd``).
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


class SessionCallback(Protocol):
    """What the core calls on its host. Implementations must not block or re-enter."""

    def deliver(self, delivery: Delivery) -> None:
        """Hand one delivery to the consumer ``delivery.consumer_id``."""

    def consumer_closed(self, consumer_id: int, reason: str) -> None:
        """The broker closed the consumer on its own (its destination was deleted...)."""

    def send_done(self, ticket: object, error: BrokerError | None) -> None:
        """A send (or commit) that producer flow control parked went through (``error``
        None) or failed, not stored; ``ticket`` is what the host passed with it."""


#: ``deliver_many(consumer_id, first_tag, messages, delivery_counts)``
DeliverMany = Callable[[int, int, list[ServerMessage], list[int]], None]


class BatchSessionCallback(SessionCallback, Protocol):
    """A SessionCallback that also takes a run of deliveries to one consumer at once.

    Optional: the core uses ``deliver_many`` when the callback has it, else one
    ``deliver`` per message. A run is what a consumer alone in a queue's dispatch ring
    gets (up to its credit and flow limit): the i-th message has delivery tag
    ``first_tag + i`` and delivery count ``delivery_counts[i]``, exactly the deliveries
    ``deliver`` would have seen one by one, in that order. The lists belong to the
    callback afterwards. Same rules as ``deliver``: buffer only, never re-enter.
    """

    def deliver_many(
        self, consumer_id: int, first_tag: int, messages: list[ServerMessage],
        delivery_counts: list[int],
    ) -> None: ...


@dataclass(slots=True, eq=False)
class MessageRef:
    """A message's place in one queue (a topic message has one ref per subscription).

    ``delivery_count`` is the number of counted deliveries so far; a delivery carries
    ``delivery_count + 1``.
    """

    message: ServerMessage
    priority: int
    delivery_count: int = 0
    state: int = READY


@dataclass(slots=True, eq=False)
class DeliveryChannel:
    """The per-connection part of delivery: tag sequence, tag owner index, callback.

    ``deliver_many`` is the callback's optional batch entry point (see
    :class:`~.api.BatchSessionCallback`), looked up once here rather than per delivery.
    ``gate`` is what the connection's flow limit still lets through (-1: no limit;
    :class:`~.flow_gate.ConnectionGate` owns it, every delivery takes one).
    """

    connection_id: int
    callback: SessionCallback
    next_tag: int = 1
    tags: dict[int, ServerConsumer] = field(default_factory=dict)
    deliver_many: DeliverMany | None = None
    gate: int = -1

    def __post_init__(self) -> None:
        if self.deliver_many is None:
            self.deliver_many = getattr(self.callback, "deliver_many", None)


@dataclass(slots=True, eq=False)
class ServerConsumer:
    consumer_id: int
    channel: DeliveryChannel
    queue: QueueRef
    filter: Filter | None
    auto_ack: bool
    flow_limit: int | None
    credit: int = 0
    #: tag -> ref, in delivery order (dicts keep insertion order).
    delivering: dict[int, MessageRef] = field(default_factory=dict)
    in_ring: bool = False
    closed: bool = False

    def can_receive(self) -> bool:
        if self.closed or self.credit <= 0 or self.channel.gate == 0:
            return False
        limit = self.flow_limit
        return limit is None or len(self.delivering) < limit


@dataclass(slots=True, eq=False)
class PageBudget:
    """The RAM budget of ready messages, shared by every queue of a broker (seed 002's
    linked caches: one fixed amount of RAM, however many queues draw on it).

    ``used`` is what ready messages in RAM cost (``size + PAGE_OVERHEAD`` each): a queue
    adds to it when a message becomes ready in RAM and takes it back when the message
    stops being ready. Past ``limit`` new backlog is paged out (:mod:`.paging`)."""

    limit: int
    used: int = 0


@dataclass(slots=True, eq=False)
class Level:
    """One priority level's refs in RAM, head first: a list and the index of its head.

    Refs join at the tail (:meth:`append`) and leave from the head (:meth:`popleft`), as
    with a deque, and come back to the head (:meth:`appendleft`: a cancelled delivery).
    ``items[head:]`` are the refs, tombstones included; the slots before ``head`` hold
    None (taken, or room left for refs coming back).

    Why not a ``collections.deque``: CPython's deque allocates a 64-slot block with its
    first element, 760 bytes with the object for a level holding one ref, and most queues
    hold a few messages at one priority (issue 17: a queue holding one message cost 2 KB
    of RSS, a third of it that block). A list grows with its length: this record and a
    one-ref list are about 130 bytes. Every step stays O(1) amortised, so a level of a
    million refs still dispatches in O(1) per message:

    * :meth:`popleft` clears the head's slot and moves ``head`` on; once ``head`` passes
      half the list (and :data:`LEVEL_SLACK` slots) the taken slots are dropped in one
      ``del``, which moves fewer refs than were taken since the last one;
    * :meth:`appendleft` fills the slot before ``head``; with none left it opens room at
      the front in proportion to the level (an eighth of it), so a run of refs coming
      back moves the level once per eighth of its length, not once per ref.

    The compiled twin is a final ``cdef class`` with the same fields and methods
    (``jmspy/_cext/records.pxd``), whose dispatch loop calls them as C functions.
    """

    items: list[MessageRef | None] = field(default_factory=list)
    head: int = 0

    def __len__(self) -> int:
        """The refs held, tombstones included."""
        return len(self.items) - self.head

    def __iter__(self) -> Iterator[MessageRef]:
        """The refs, head first, tombstones included; the level must not change while
        this runs (as with a deque, minus the check)."""
        items = self.items
        for i in range(self.head, len(items)):
            ref = items[i]
            assert ref is not None
            yield ref

    def append(self, ref: MessageRef) -> None:
        """``ref`` joins at the tail."""
        self.items.append(ref)

    def appendleft(self, ref: MessageRef) -> None:
        """``ref`` goes ahead of every ref held."""
        items = self.items
        head = self.head
        if not head:  # no room left at the front: open some, an eighth of the level
            head = len(items) // 8 + 4
            items[:0] = [None] * head
        head -= 1
        items[head] = ref
        self.head = head

    def peek(self) -> MessageRef:
        """The head ref (IndexError if the level is empty)."""
        if self.head >= len(self.items):
            raise IndexError("peek at an empty level")
        ref = self.items[self.head]
        assert ref is not None
        return ref

    def popleft(self) -> MessageRef:
        """Take the head ref off (IndexError if the level is empty)."""
        items = self.items
        head = self.head
        if head >= len(items):
            raise IndexError("pop from an empty level")
        ref = items[head]
        assert ref is not None
        items[head] = None
        head += 1
        if head >= LEVEL_SLACK and head * 2 >= len(items):  # drop the taken slots
            del items[:head]
            head = 0
        self.head = head
        return ref

    def remove(self, ref: MessageRef) -> None:
        """Take ``ref`` out from anywhere in the level: O(level length)."""
        items = self.items
        del items[items.index(ref, self.head)]


def _no_levels() -> list[Level | None]:
    return [None] * PRIORITIES


@dataclass(slots=True, eq=False)
class LevelsRecord:
    """The fields of a queue's :class:`~.ready_levels.ReadyLevels` (its ready messages in
    RAM) that dispatch reads and writes per message.

    ``ReadyLevels`` derives from this record and owns what happens to it; the dispatch
    twins (:mod:`.queue_run` and its compiled twin) reach the fields directly.

    ``_levels`` has one entry per priority level, highest first: a :class:`Level` of
    refs, or None until a message of that level was first ready (most queues only ever
    see one or two priorities: issue 17). ``count`` is the number of ready refs (the
    levels may also hold tombstones). ``memory_usage`` is this queue's share of the
    broker's ``budget``: every change to ``budget.used`` changes it by the same amount.
    ``paged`` has bit ``i`` set when level ``i`` continues on disk."""

    budget: PageBudget
    _levels: list[Level | None] = field(default_factory=_no_levels)
    count: int = 0
    memory_usage: int = 0
    paged: int = 0


class QueueRecord:
    """The fields of a :class:`~.queue.Queue` that dispatch reads and writes per message.

    ``Queue`` derives from this record (the compiled twin's typed ``cdef class``, or this
    slotted class) and sets every field in its ``__init__``; the compiled dispatch loop
    then reaches them as C fields. Behaviour stays ``Queue``'s.

    ``levels`` is the queue's ready messages in RAM (a :class:`LevelsRecord`, owned by
    :class:`~.ready_levels.ReadyLevels`); ``_ring`` (the consumers that may receive) is
    None until a consumer first could, and again once it empties on a consumer's removal."""

    __slots__ = (
        "_dispatching",
        "_filtered",
        "_pages",
        "_persist",
        "_policy",
        "_ring",
        "_ring_size",
        "deleted",
        "delivering_count",
        "dequeued",
        "enqueued",
        "host",
        "levels",
        "name",
    )  # fmt: skip


class FlowRecord:
    """The fields of the broker's :class:`~.producer_flow.ProducerFlow` that every send
    reads, and the one question it asks of them.

    ``ProducerFlow`` derives from this record (the compiled twin's typed ``cdef class``,
    or this slotted class) and sets every field in its ``__init__``; behaviour stays
    ``ProducerFlow``'s. ``_budget`` is the broker's RAM budget of ready messages,
    ``_memory_limit`` the RAM below which no destination can be at its memory limit (the
    broker's, or a destination's default share when smaller), ``_spool`` its temp spool
    (``used`` bytes),
    ``_stored`` whether it has a store, ``_waiting`` the parked sends by connection id,
    ``destination_limits`` whether any address has a memory limit."""

    __slots__ = (
        "_budget",
        "_memory_limit",
        "_spool",
        "_stored",
        "_waiting",
        "destination_limits",
        "temp_limit",
    )  # fmt: skip

    _budget: PageBudget
    _memory_limit: int
    _spool: SpoolUse
    _stored: bool
    _waiting: dict[int, Any]
    destination_limits: bool
    temp_limit: int

    def free_for(self, message: ServerMessage) -> bool:
        """Whether ``message`` may go without asking anything more: no send is parked,
        pending messages take less RAM than any destination's default share, the temp
        spool is below its limit, no address has a limit of its own, and the message
        needs no room in the store. False means "ask ``ProducerFlow.must_wait``", not
        "wait"."""
        return (not self._waiting and self._budget.used < self._memory_limit
                and self._spool.used < self.temp_limit and not self.destination_limits
                and not (message.persistent and self._stored))


class QueueRef(Protocol):
    """What a consumer's record and a connection's record let the core call on a queue.

    A Protocol, so that the records sit below the queue (which derives from
    :class:`QueueRecord`): the records name no module above them, and the queue's own
    code narrows to :class:`~.queue.Queue` where it needs more."""

    @property
    def name(self) -> str: ...

    @property
    def deleted(self) -> bool: ...

    def enqueue(self, message: ServerMessage) -> None: ...

    def grant(self, consumer: ServerConsumer, credits: int) -> None: ...

    def remove_consumer(self, consumer: ServerConsumer) -> None: ...

    def dispatch(self) -> None: ...

    def acknowledge(self, c: ServerConsumer, tag: int) -> None: ...

    def cancel(self, c: ServerConsumer, tag: int, redelivered: bool) -> None: ...

    def reject(self, c: ServerConsumer, tag: int, reason: str) -> None: ...


class SpoolUse(Protocol):
    """What :meth:`FlowRecord.free_for` reads of the temp spool: the bytes it holds."""

    @property
    def used(self) -> int: ...


class BrokerState(Protocol):
    """What the common send (``queue_run.route_fast``) reads of a connection's broker.
    A Protocol, so that the records sit below the broker: ``ServerConnection`` narrows
    its ``_broker`` to the :class:`~.broker.Broker` itself."""

    @property
    def closed(self) -> bool: ...

    @property
    def security(self) -> object | None: ...


class ConnectionRecord:
    """The fields of a :class:`~.connection.ServerConnection` that its common send reads
    (``queue_run.route_fast`` and its compiled twin).

    ``ServerConnection`` derives from this record and sets every field in its
    ``__init__``; behaviour stays the connection's. ``_flow`` and ``_queues`` are its
    broker's producer flow and queues by name, both fixed for the broker's life."""

    __slots__ = ("_broker", "_flow", "_id", "_queues", "closed")

    _broker: BrokerState
    _flow: FlowRecord
    _id: int
    _queues: Mapping[str, QueueRef]
    closed: bool
