# cython: language_level=3
"""The broker's records as typed C structs (the compiled twin of
jmspy/broker_ref/core/records.py, whose docstring says why).

Declared once, here; ``cython_ext/records.pyx`` implements them and the compiled dispatch
loop (``cython_ext/queue_run.pyx``) cimports them to read and write the fields directly.
After editing, touch both .pyx files.
"""

cimport cython


cdef class ServerMessage:
    # Every field an object, as in the pure dataclass: the twins must accept the same
    # values; what the typed record buys is the direct field access.
    cdef public object message_id
    cdef public object kind
    cdef public object destination
    cdef public object body_type
    cdef public object body
    cdef public object properties
    cdef public object persistent
    cdef public object priority
    cdef public object timestamp
    cdef public object expiration
    cdef public object deliver_at
    cdef public object correlation_id
    cdef public object reply_to
    cdef public object jms_type
    cdef public object producer_connection
    cdef public object size


cdef class MessageRef:
    cdef public object message
    cdef public Py_ssize_t priority
    cdef public Py_ssize_t delivery_count
    cdef public int state


cdef class DeliveryChannel:
    cdef public object connection_id
    cdef public object callback
    cdef public Py_ssize_t next_tag
    cdef public dict tags
    cdef public object deliver_many
    cdef public Py_ssize_t gate


cdef class ServerConsumer:
    cdef public object consumer_id
    cdef public DeliveryChannel channel
    cdef public object queue
    cdef public object filter
    cdef public bint auto_ack
    cdef public object flow_limit
    cdef public Py_ssize_t credit
    cdef public dict delivering
    cdef public bint in_ring
    cdef public bint closed

    cpdef bint can_receive(self)


cdef class PageBudget:
    cdef public Py_ssize_t limit
    cdef public Py_ssize_t used


@cython.final
cdef class Level:
    # final: the dispatch loop calls its methods as C functions, no Python lookup
    cdef public list items
    cdef public Py_ssize_t head

    cpdef append(self, ref)
    cpdef appendleft(self, ref)
    cpdef peek(self)
    cpdef popleft(self)
    cpdef remove(self, ref)


cdef class LevelsRecord:
    cdef public PageBudget budget
    cdef public list _levels
    cdef public Py_ssize_t count
    cdef public Py_ssize_t memory_usage
    cdef public Py_ssize_t paged


cdef class QueueRecord:
    cdef public object name
    cdef public object host
    cdef public bint _persist
    cdef public LevelsRecord levels
    cdef public object _ring
    cdef public Py_ssize_t _filtered
    cdef public bint _dispatching
    cdef public Py_ssize_t delivering_count
    cdef public Py_ssize_t enqueued
    cdef public Py_ssize_t dequeued
    cdef public bint deleted
    cdef public Py_ssize_t _ring_size
    cdef public object _policy
    cdef public object _pages


cdef class FlowRecord:
    cdef public PageBudget _budget
    cdef public Py_ssize_t _memory_limit
    cdef public object _spool
    cdef public bint _stored
    cdef public dict _waiting
    cdef public bint destination_limits
    cdef public Py_ssize_t temp_limit

    cpdef bint free_for(self, ServerMessage message) except -1


cdef class ConnectionRecord:
    cdef public object _broker
    cdef public FlowRecord _flow
    cdef public object _id
    cdef public object _queues
    cdef public bint closed
