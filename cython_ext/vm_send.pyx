# cython: language_level=3, auto_pickle=False
"""``vm://`` sends: a client message into the in-process broker (compiled twin).

The pure twin ``jmspy/transports/vm_send.py`` says what a :class:`Sender` does and why it
is a twin; ``tests/test_vm_send_twins.py`` holds both to the same calls and outcomes.
Change one, change the other.

What compiling buys, once per message sent: the conversion is a C call into the compiled
``vm_convert`` (no Python frame), the broker's lock is taken and released through its C
methods, the ticket is a C integer, and the common send (an existing queue with room) is
routed by a C call into the compiled ``queue_run.route_fast``, which reads the broker
connection's typed record. Any other send is the broker connection's ``send``, a Python
call: it is the broker core's (it asks ``route_fast`` again first, which declines in a
few field reads).
"""

from jmspy._cext.queue_run cimport route_fast
from jmspy._cext.records cimport ConnectionRecord, ServerMessage
from jmspy._cext.vm_convert cimport to_server_message

from jmspy.errors import IllegalStateException

__all__ = ["FAILED", "PARKED", "SENT", "Sender"]

#: Sender.try_send's outcomes (the pure twin's numbers)
FAILED, SENT, PARKED = 0, 1, 2


def _unattached():
    raise IllegalStateException("the vm connection is not open yet")


cdef class Sender:
    """One vm connection's sends; see the pure twin."""

    cdef public object parked
    cdef object _new_waiter
    cdef object _failed
    cdef public object timeout_ms
    cdef long long _ticket
    cdef public object conn
    cdef object _connection_id
    cdef object _acquire
    cdef object _release
    cdef object _poke

    def __init__(self, parked, new_waiter, failed, timeout_ms):
        self.parked = parked
        self._new_waiter = new_waiter
        self._failed = failed
        self.timeout_ms = timeout_ms
        self._ticket = 0
        self.conn = None
        self._connection_id = 0
        self._acquire = _unattached
        self._release = _unattached
        self._poke = _unattached

    def attach(self, conn, host):
        """Send on ``conn``, a connection to ``host``'s broker, from now on."""
        self._acquire = host.lock.acquire
        self._release = host.lock.release
        self._poke = host.poke_timers
        self._connection_id = conn.connection_id  # (a property: read once)
        self.conn = conn

    def detach(self):
        """The connection closed: a send from now on fails."""
        self.conn = None

    def send(self, message, tx=None):
        """Route ``message`` (or stage it in ``tx``); waits while flow control holds it."""
        conn = self.conn
        if conn is None:
            raise IllegalStateException("the vm connection is closed")
        cdef ServerMessage server_message = <ServerMessage>to_server_message(
            message, self._connection_id)
        waiting = None
        cdef bint routed
        try:
            self._acquire()
            try:
                self._ticket += 1  # under the broker's lock, like every send of this Sender
                ticket = self._ticket
                # the common send needs no more than route_fast (see the pure twin)
                routed = tx is None and route_fast(<ConnectionRecord?>conn, server_message)
                if not routed and not conn.send(server_message, tx, ticket=ticket,
                                                timeout_ms=self.timeout_ms):
                    waiting = self._new_waiter()
                    self.parked[ticket] = waiting
                    self._poke()  # its deadline (sendTimeout, the broker's own) to keep
                elif server_message.deliver_at or server_message.expiration:
                    self._poke()  # a deadline to keep
            finally:
                self._release()
        except Exception as exc:
            self._failed(exc, conn, message, tx)
            return
        if waiting is not None:
            waiting.wait()  # producer flow control (seed 003): the producer waits

    def try_send(self, message, tx, park):
        """send() that never waits: SENT, PARKED (park() made what the broker settles)
        or FAILED (nothing routed); see the pure twin."""
        conn = self.conn
        if conn is None:
            return FAILED
        cdef ServerMessage server_message
        cdef bint routed
        try:
            server_message = <ServerMessage>to_server_message(message, self._connection_id)
            self._acquire()
            try:
                self._ticket += 1
                ticket = self._ticket
                routed = tx is None and route_fast(<ConnectionRecord?>conn, server_message)
                if not routed and not conn.send(server_message, tx, ticket=ticket,
                                                timeout_ms=self.timeout_ms):
                    self.parked[ticket] = park()
                    self._poke()
                    return PARKED
                if server_message.deliver_at or server_message.expiration:
                    self._poke()
            finally:
                self._release()
        except Exception:
            return FAILED
        return SENT
