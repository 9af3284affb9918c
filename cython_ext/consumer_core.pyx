# cython: language_level=3, auto_pickle=False
"""A MessageConsumer's shared fields and its hand-off of deliveries (compiled twin).

The pure twin ``jmspy/consumer_core.py`` says what this is and why it is a twin;
``tests/test_consumer_core_twins.py`` holds both to the same calls. Change one, change
the other.

What compiling buys, once per run of deliveries (once per message sent over ``vm://``
while the consumer keeps up): no Python frame, the lock taken and released through its
C methods, and the prefetch buffer's ``push_many`` called in C. The fields are C members
that Python code (the session, its dispatcher, flow control) reads as fast as slots
(``jmspy/_cext/members.pxd``).
"""

from jmspy._cext.members cimport check_members, expose_members, member_indices
from jmspy._cext.prefetch cimport PrefetchBuffer

from jmspy.consumer_core import FIELDS

__all__ = ["FIELDS", "ConsumerCore"]

#: the fields _deliver_many reads (checked: an application may have deleted one)
cdef tuple _READ = member_indices(FIELDS, (
    "_session", "_lock", "_cond", "_buffer", "_listener", "_closed", "_scheduled",
    "_receiving"))


cdef class ConsumerCore:
    """A consumer's lock, buffer, listener and state; ``_deliver_many``. See the pure
    twin."""

    cdef public object _session
    cdef public object _lock
    cdef public object _cond
    cdef public object _buffer
    cdef public object _listener
    cdef public object _closed
    cdef public object _scheduled
    cdef public object _receiving

    def _deliver_many(self, messages):
        """Buffer a run of messages under one lock round trip and wake their reader."""
        check_members(self, FIELDS, _READ)
        lock = self._lock
        lock.acquire()
        try:
            if self._closed:
                # Late delivery after close: the broker has it as delivered; the close
                # path cancels everything unacknowledged, so just drop our copy.
                return
            buffer = self._buffer
            if type(buffer) is PrefetchBuffer:
                (<PrefetchBuffer>buffer).push_many(messages)
            else:
                buffer.push_many(messages)
            has_listener = self._listener is not None
            if not has_listener and self._receiving:
                self._cond.notify()
        finally:
            lock.release()
        if has_listener and not self._scheduled:  # see the pure twin
            self._session._schedule(self)


# The session, its dispatcher and flow control read these per message: as fast as the
# pure twin's slots (jmspy/_cext/members.pxd says why).
expose_members(ConsumerCore, FIELDS)
