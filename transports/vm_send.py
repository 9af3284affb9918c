"""``vm://`` sends: a client message into the in-process broker (pure twin).

A send over ``vm://`` is a call on the producer's thread: convert the message
(:mod:`.vm_convert`), take the broker's lock, hand it to the broker connection. That was
about half of what a message cost the producer, so it is a twin: the compiled one
(``cython_ext/vm_send.pyx``) calls the conversion in C, takes the lock through its C
methods and routes the common send with ``queue_run.route_fast`` as a C call.
:class:`Sender` does only that hand-off, and numbers the sends; the
:class:`~jmspy.transports.vm.VmTransport` it belongs to keeps everything else (which
broker, reconnecting, what an error means to JMS) and is called back for a failure.
``tests/test_vm_send_twins.py`` holds both twins to the same calls and outcomes. Change
one, change the other.

Producer flow control (seed 003): a send the broker cannot take yet is *parked* there
under its ticket number; its waiter goes into ``parked`` before the lock is released (so
the broker cannot settle the ticket first) and the producer waits on it outside the lock,
so consumers, its own included, keep acknowledging meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from jmspy.broker_ref.core import run_twins as core_twins
from jmspy.errors import IllegalStateException

# The pure conversion, not the running twin: this module is itself a twin, below the
# transports' registry that names it, and both conversions give the same message.
from .vm_convert import to_server_message as _to_server_message

if TYPE_CHECKING:
    from jmspy.message import Message

__all__ = ["FAILED", "PARKED", "SENT", "Sender"]

#: :meth:`Sender.try_send`'s outcomes (the compiled twin's are the same numbers)
FAILED, SENT, PARKED = 0, 1, 2

_route_fast = core_twins.queue_run.route_fast


class Waiter(Protocol):
    """What a parked send's producer waits on (the transport's ``_Waiting``)."""

    def wait(self) -> None: ...


class Sender:
    """One vm connection's sends. ``conn`` is the broker connection (None when closed);
    ``attach`` points it at another broker after a reconnect."""

    __slots__ = ("_acquire", "_connection_id", "_failed", "_new_waiter", "_poke", "_release",
                 "_ticket", "conn", "parked", "timeout_ms")

    def __init__(
        self,
        parked: dict[int, Any],
        new_waiter: Callable[[], Waiter],
        failed: Callable[[Exception, Any, Message, str | None], None],
        timeout_ms: int,
    ) -> None:
        #: the parked sends' waiters by ticket (the broker's callback settles them)
        self.parked = parked
        self._new_waiter = new_waiter
        #: called with (error, connection, message, tx) when a send raised: it retries
        #: after a reconnect or raises what the error means to JMS
        self._failed = failed
        #: sendTimeout: how long a parked send may wait for space (0: as long as it takes)
        self.timeout_ms = timeout_ms
        self._ticket = 0
        self.conn: Any = None
        self._connection_id = 0
        self._acquire: Callable[[], object] = _unattached
        self._release: Callable[[], object] = _unattached
        self._poke: Callable[[], object] = _unattached

    def attach(self, conn: Any, host: Any) -> None:
        """Send on ``conn``, a connection to ``host``'s broker, from now on."""
        self._acquire = host.lock.acquire
        self._release = host.lock.release
        self._poke = host.poke_timers
        self._connection_id = conn.connection_id  # (a property: read once)
        self.conn = conn

    def detach(self) -> None:
        """The connection closed: a send from now on fails."""
        self.conn = None

    def send(self, message: Message, tx: str | None = None) -> None:
        """Route ``message`` (or stage it in ``tx``); waits while flow control holds it."""
        conn = self.conn
        if conn is None:
            raise IllegalStateException("the vm connection is closed")
        server_message = _to_server_message(message, self._connection_id)
        waiting: Waiter | None = None
        try:
            self._acquire()
            try:
                self._ticket += 1  # under the broker's lock, like every send of this Sender
                ticket = self._ticket
                # the common send, to an existing queue with room, needs no more than
                # the broker's route_fast; anything else is the connection's to decide
                routed = tx is None and _route_fast(conn, server_message)
                if not routed and not conn.send(server_message, tx, ticket=ticket,
                                                timeout_ms=self.timeout_ms):
                    waiting = self.parked[ticket] = self._new_waiter()
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

    def try_send(self, message: Message, tx: str | None, park: Callable[[], Any]) -> int:
        """:meth:`send` that never waits (for a caller on an event loop): :data:`SENT`
        when the broker routed (or staged) it; :data:`PARKED` when producer flow control
        held it, ``park()`` having made what the broker settles (``settle(error)``, under
        its lock) once there is room; :data:`FAILED` when it raised, nothing routed (the
        caller sends it with :meth:`send`, which retries after a reconnect or raises)."""
        conn = self.conn
        if conn is None:
            return FAILED
        try:
            server_message = _to_server_message(message, self._connection_id)
            self._acquire()
            try:
                self._ticket += 1
                ticket = self._ticket
                routed = tx is None and _route_fast(conn, server_message)
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


def _unattached() -> object:
    raise IllegalStateException("the vm connection is not open yet")
