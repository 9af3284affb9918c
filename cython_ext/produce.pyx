# cython: language_level=3
"""A plain ``MessageProducer.send(message)`` (compiled twin).

The pure twin ``jmspy/_pure/produce.py`` documents the steps and when they apply;
``tests/test_produce_twins.py`` runs both over the same random states. Change one, change
the other.

What compiling buys: the open checks, the message id and the seven header stores run
without interpreted bytecode; the headers of jmspy's own message classes are written
at their slots (an application subclass, which might override one with a property, gets
plain attribute stores).
"""

from cpython.time cimport time as c_time

from jmspy._cext.slots cimport set_slot, slot_offset

__all__ = ["send_plain"]

cdef object _Message = None
cdef tuple _OWN = ()  # jmspy.message's own classes: their headers are plain slots
cdef Py_ssize_t M_ID, M_TS, M_DEST, M_MODE, M_PRIO, M_EXP, M_TIME


cdef int _load() except -1:
    global _Message, _OWN, M_ID, M_TS, M_DEST, M_MODE, M_PRIO, M_EXP, M_TIME
    from jmspy.message import BytesMessage, MapMessage, Message, TextMessage
    _OWN = (TextMessage, BytesMessage, Message, MapMessage)
    M_ID = slot_offset(Message, "message_id")
    M_TS = slot_offset(Message, "timestamp")
    M_DEST = slot_offset(Message, "destination")
    M_MODE = slot_offset(Message, "delivery_mode")
    M_PRIO = slot_offset(Message, "priority")
    M_EXP = slot_offset(Message, "expiration")
    M_TIME = slot_offset(Message, "delivery_time")
    _Message = Message
    return 0


cpdef send_plain(object producer, object message):
    """``producer.send(message)`` without per-call overrides; see the pure twin."""
    if _Message is None:
        _load()
    cdef object session = producer._session
    cdef object connection = session._connection
    cdef object target = producer.destination
    if (producer._closed or session._closed or session._closing or connection._closed
            or connection._closing or target is None or not isinstance(message, _Message)):
        producer._send_full(message)
        return
    # int(time.time() * 1000), as the pure twin computes it
    cdef object now = int(c_time() * 1000)
    cdef object ttl = producer._time_to_live
    cdef object delay = producer._delivery_delay
    cdef object message_id = f"{connection._id_prefix}{next(connection._message_ids)}"
    cdef object expiration = now + int(ttl * 1000) if ttl > 0 else 0
    cdef object delivery_time = now + int(delay * 1000) if delay > 0 else now
    if type(message) in _OWN:
        set_slot(message, M_ID, message_id)
        set_slot(message, M_TS, now)
        set_slot(message, M_DEST, target)
        set_slot(message, M_MODE, producer._delivery_mode)
        set_slot(message, M_PRIO, producer._priority)
        set_slot(message, M_EXP, expiration)
        set_slot(message, M_TIME, delivery_time)
    else:
        message.message_id = message_id
        message.timestamp = now
        message.destination = target
        message.delivery_mode = producer._delivery_mode
        message.priority = producer._priority
        message.expiration = expiration
        message.delivery_time = delivery_time
    session._transport.send(message, session._tx)
