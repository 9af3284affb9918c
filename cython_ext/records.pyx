# cython: language_level=3
"""The broker's dispatch records with typed fields (compiled twin).

The pure twin ``jmspy/broker_ref/core/records.py`` says what each record is and why the
twin exists; the fields are declared in ``jmspy/_cext/records.pxd``.
``tests/test_records_twins.py`` holds both to the same constructor, defaults, repr and
behaviour. Change one, change the other.
"""

cimport cython

import dataclasses

from jmspy._cext.members cimport expose_members

from jmspy.broker_ref.core.kinds import BodyType
from jmspy.broker_ref.core.records import LEVEL_SLACK, PRIORITIES, READY

__all__ = ["ConnectionRecord", "DeliveryChannel", "FlowRecord", "Level", "LevelsRecord",
           "MessageRef", "PageBudget", "QueueRecord", "ServerConsumer", "ServerMessage"]

cdef int _READY = READY
cdef Py_ssize_t _PRIORITIES = PRIORITIES
cdef Py_ssize_t _LEVEL_SLACK = LEVEL_SLACK


#: ``ServerMessage``'s default for ``properties``: "not given, make a new dict" (what the
#: dataclass's ``default_factory=dict`` means), told apart from any value a caller passes.
cdef object _NEW_DICT = object()


@cython.no_gc
@cython.dataclasses.dataclass(init=False)
cdef class ServerMessage:
    """A message as the broker holds it; see the pure twin. A Cython dataclass, so
    ``dataclasses.replace`` and ``fields`` work on it as on the pure one.

    Outside the cyclic GC (``no_gc``), like ``MessageRef``: its fields are text, numbers,
    a ``(kind, name)`` reply-to and a body and properties of JMS value types, none of
    which can lead back to a message, so it is never part of a cycle. That saves the
    16-byte GC header per held message, and the allocations that count towards the
    collector's next pass: one message crossing ``vm://`` allocated five tracked
    objects, one a broker message (issue 17)."""

    message_id: object
    kind: object
    destination: object
    body_type: object = BodyType.MESSAGE
    body: object = None
    properties: object = cython.dataclasses.field(default_factory=dict)
    persistent: object = True
    priority: object = 4
    timestamp: object = 0
    expiration: object = 0
    deliver_at: object = 0
    correlation_id: object = None
    reply_to: object = None
    jms_type: object = None
    producer_connection: object = 0
    size: object = 0

    def __init__(self, message_id, kind, destination, body_type=BodyType.MESSAGE, body=None,
                 properties=_NEW_DICT, persistent=True, priority=4, timestamp=0,
                 expiration=0, deliver_at=0, correlation_id=None, reply_to=None,
                 jms_type=None, producer_connection=0, size=0):
        # Written out rather than generated: Cython's generated __init__ imports the
        # dataclasses module on every call to find the default-factory sentinel (a
        # PyImport_Import per message the broker takes). Same signature, same defaults.
        self.message_id = message_id
        self.kind = kind
        self.destination = destination
        self.body_type = body_type
        self.body = body
        self.properties = {} if properties is _NEW_DICT else properties
        self.persistent = persistent
        self.priority = priority
        self.timestamp = timestamp
        self.expiration = expiration
        self.deliver_at = deliver_at
        self.correlation_id = correlation_id
        self.reply_to = reply_to
        self.jms_type = jms_type
        self.producer_connection = producer_connection
        self.size = size


# The broker's Python code (mappings, selectors, stats) reads a message's fields per
# delivery: as fast as the pure dataclass's slots (jmspy/_cext/members.pxd says why).
expose_members(ServerMessage, tuple(f.name for f in dataclasses.fields(ServerMessage)))


@cython.no_gc
cdef class MessageRef:
    """A message's place in one queue; see the pure twin.

    Outside the cyclic GC (``no_gc``): a ref holds its message and nothing that leads
    back to a ref (a message never names its refs), so it is never part of a cycle, and
    the 16-byte GC header is saved on every queued message (issue 17). Anything holding
    refs in a cycle is still collected: a ref is a leaf of it."""

    def __init__(self, message, Py_ssize_t priority, Py_ssize_t delivery_count=0,
                 int state=_READY):
        self.message = message
        self.priority = priority
        self.delivery_count = delivery_count
        self.state = state

    def __repr__(self):
        return (f"MessageRef(message={self.message!r}, priority={self.priority!r}, "
                f"delivery_count={self.delivery_count!r}, state={self.state!r})")


cdef class DeliveryChannel:
    """The per-connection part of delivery; see the pure twin."""

    def __init__(self, connection_id, callback, Py_ssize_t next_tag=1, dict tags=None,
                 deliver_many=None, Py_ssize_t gate=-1):
        self.connection_id = connection_id
        self.callback = callback
        self.next_tag = next_tag
        self.tags = {} if tags is None else tags
        self.deliver_many = (getattr(callback, "deliver_many", None)
                             if deliver_many is None else deliver_many)
        self.gate = gate

    def __repr__(self):
        return (f"DeliveryChannel(connection_id={self.connection_id!r}, "
                f"callback={self.callback!r}, next_tag={self.next_tag!r}, "
                f"tags={self.tags!r}, deliver_many={self.deliver_many!r}, "
                f"gate={self.gate!r})")


cdef class ServerConsumer:
    """A consumer as a queue sees it; see the pure twin."""

    def __init__(self, consumer_id, DeliveryChannel channel, queue, filter, bint auto_ack,
                 flow_limit, Py_ssize_t credit=0, dict delivering=None, bint in_ring=False,
                 bint closed=False):
        self.consumer_id = consumer_id
        self.channel = channel
        self.queue = queue
        self.filter = filter
        self.auto_ack = auto_ack
        self.flow_limit = flow_limit
        self.credit = credit
        self.delivering = {} if delivering is None else delivering
        self.in_ring = in_ring
        self.closed = closed

    cpdef bint can_receive(self):
        if self.closed or self.credit <= 0 or self.channel.gate == 0:
            return False
        limit = self.flow_limit
        return limit is None or len(self.delivering) < limit

    def __repr__(self):
        return (f"ServerConsumer(consumer_id={self.consumer_id!r}, channel={self.channel!r}, "
                f"queue={self.queue!r}, filter={self.filter!r}, auto_ack={self.auto_ack!r}, "
                f"flow_limit={self.flow_limit!r}, credit={self.credit!r}, "
                f"delivering={self.delivering!r}, in_ring={self.in_ring!r}, "
                f"closed={self.closed!r})")


cdef class PageBudget:
    """The RAM budget of ready messages shared by a broker's queues; see the pure twin."""

    def __init__(self, Py_ssize_t limit, Py_ssize_t used=0):
        self.limit = limit
        self.used = used

    def __repr__(self):
        return f"PageBudget(limit={self.limit!r}, used={self.used!r})"


@cython.final
@cython.no_gc
cdef class Level:
    """One priority level's refs in RAM, head first: a list and the index of its head;
    see the pure twin for why it is not a deque and why every step is O(1) amortised.

    Outside the cyclic GC, like ``MessageRef``: it holds a list of refs, and nothing
    reached from a ref leads back to a level.

    The methods that index the list by ``head`` are compiled with bounds checks (the
    build turns them off): Python code can set ``head`` or change ``items``, and a slot
    outside the list must raise IndexError, not read or write past it."""

    def __init__(self, list items=None, Py_ssize_t head=0):
        self.items = [] if items is None else items
        self.head = head

    def __len__(self):
        cdef Py_ssize_t n = len(self.items) - self.head
        return n if n > 0 else 0  # a C length is never negative, whatever head says

    @cython.boundscheck(True)
    def __iter__(self):
        cdef list items = self.items
        cdef Py_ssize_t i
        for i in range(self.head, len(items)):
            yield items[i]

    cpdef append(self, ref):
        self.items.append(ref)

    @cython.boundscheck(True)
    cpdef appendleft(self, ref):
        cdef list items = self.items
        cdef Py_ssize_t head = self.head
        if not head:  # no room left at the front: open some, an eighth of the level
            head = len(items) // 8 + 4
            items[:0] = [None] * head
        head -= 1
        items[head] = ref
        self.head = head

    @cython.boundscheck(True)
    cpdef peek(self):
        if self.head >= len(self.items):
            raise IndexError("peek at an empty level")
        return self.items[self.head]

    @cython.boundscheck(True)
    cpdef popleft(self):
        cdef list items = self.items
        cdef Py_ssize_t head = self.head
        if head >= len(items):
            raise IndexError("pop from an empty level")
        ref = items[head]
        items[head] = None
        head += 1
        if head >= _LEVEL_SLACK and head * 2 >= len(items):  # drop the taken slots
            del items[:head]
            head = 0
        self.head = head
        return ref

    cpdef remove(self, ref):
        cdef list items = self.items
        del items[items.index(ref, self.head)]

    def __repr__(self):
        return f"Level(items={self.items!r}, head={self.head!r})"


cdef class LevelsRecord:
    """The per-message fields of a queue's ready levels (``ReadyLevels`` derives from
    it); see the pure twin."""

    def __init__(self, PageBudget budget, list _levels=None, Py_ssize_t count=0,
                 Py_ssize_t memory_usage=0, Py_ssize_t paged=0):
        self.budget = budget
        self._levels = [None] * _PRIORITIES if _levels is None else _levels
        self.count = count
        self.memory_usage = memory_usage
        self.paged = paged

    def __repr__(self):
        return (f"{type(self).__qualname__}(budget={self.budget!r}, "
                f"_levels={self._levels!r}, count={self.count!r}, "
                f"memory_usage={self.memory_usage!r}, paged={self.paged!r})")


cdef class QueueRecord:
    """The per-message fields of a queue (``Queue`` derives from it); see the pure twin."""


cdef class FlowRecord:
    """The fields of the broker's producer flow every send reads (``ProducerFlow``
    derives from it); see the pure twin."""

    cpdef bint free_for(self, ServerMessage message) except -1:
        """Whether ``message`` may go without asking anything more; see the pure twin."""
        return (not self._waiting and self._budget.used < self._memory_limit
                and self._spool.used < self.temp_limit and not self.destination_limits
                and not (message.persistent and self._stored))


cdef class ConnectionRecord:
    """The fields of a broker connection its common send reads (``ServerConnection``
    derives from it); see the pure twin."""
