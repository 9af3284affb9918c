"""Listener dispatch for one consumer, with coalesced AUTO acknowledgements (pure twin).

The compiled twin is ``cython_ext/dispatch.pyx`` (``jmspy._cext.dispatch``); both satisfy
:class:`jmspy.dispatch_protocol.DrainFunction` and ``tests/test_dispatch_twins.py`` feeds
them the same scripted sessions. Change one, change the other.

Why a drain loop: waking the session's dispatcher thread once per message (condition
variable, ready deque, a lock round trip to reschedule the consumer) cost about as much
as the listener call itself. Once woken, the dispatcher now keeps taking messages from
the same consumer while no *other* consumer of the session is waiting, so two busy
consumers still alternate message by message as before.

Why AUTO acknowledgements may be coalesced: JMS AUTO_ACKNOWLEDGE requires a message to
be acknowledged after its listener returned normally; it does not require one broker
round trip per message. ``drain`` queues the tag of every message whose listener
returned and sends the queued tags together, always *before* anything that could hand a
message back to the broker or let the application observe the gap:

* before redelivering a message whose listener raised (or called ``recover()``), so the
  earlier messages are consumed, not redelivered;
* when leaving the loop (the buffer ran dry, another consumer is waiting, the
  connection stopped, the session is closing, a close was requested from inside the
  listener), unless the transport would have to wait for another thread to take them
  (``session._offer_acks``; vm://: a producer holds the broker's lock mid-send). Then
  they stay queued: the next drain counts them as held from its start, so the two rules
  below still bound them, its flushes carry them, and an idle dispatcher sends them
  after a grace of a millisecond (``jmspy/session_dispatch.py`` says why); a close
  settles them either way;
* as soon as the consumed count would make the flow window ask for the next batch, so
  the credit grants happen at exactly the same message as with one ack per message
  (seed 004: the 500th consumption asks for 500);
* after ``ack_batch`` messages at most, which bounds how many messages a crash of the
  client process could see redelivered (the price DUPS_OK pays, kept small here).

A consumer closed from another thread takes its queued tags with it and acknowledges
them (``Session._close_consumer``), so a processed message is never redelivered because
its acknowledgement was still queued. The session's acknowledgement strategy
(``jmspy/acknowledgement.py``) owns the queue and says how long it may grow (its
``batch``: 0 in every mode but AUTO). Coalescing is off in pull mode (limit 0: every
consumption must pull the next message) and with the connection-wide flow limit (a
consumption there may feed a starved consumer elsewhere, which must not wait).
"""

from __future__ import annotations

from collections import Counter, deque
from operator import itemgetter
from typing import Any

from jmspy.dispatch_protocol import DrainConnection, DrainConsumer, DrainFunction, DrainSession

__all__ = ["consumed_counts", "drain", "held_tags", "take_held"]

_consumer_of = itemgetter(0)
_tag_of = itemgetter(1)


def drain(session: DrainSession, connection: DrainConnection, consumer: DrainConsumer) -> int:
    """Run ``consumer``'s listener over its buffered messages; returns how many ran.

    Always takes at least one message if there is one (the caller popped this consumer
    from the ready queue for it), then continues while nothing else needs the thread.
    """
    ready = session._ready
    # Read once: the session replaces its list of deferred closes only between drains,
    # on this thread; the state records are its own and its connection's, for good.
    deferred = session._deferred
    life = session._life
    connection_life = connection._life
    ack = session.acknowledgement
    lock = consumer._lock
    buf = consumer._buffer
    limit = buf.limit
    ack_batch = ack.batch  # > 0 only for AUTO_ACKNOWLEDGE: acks may be queued
    coalesce = ack_batch > 0 and limit > 0 and not connection._flow.enabled
    trigger = limit * buf.threshold
    acknowledger = ack.acknowledger
    hold = ack.hold
    # acks an earlier drain left queued (the transport was busy) count as held here
    pending = ack.held_count() if coalesce else 0
    handled = 0
    last_listener: Any = None
    call: Any = None
    # session._current names the consumer whose listener is running, for recover() and
    # close() called from inside it. It is set before the first listener call and kept
    # across a run of coalesced messages (nothing but drain runs on this thread between
    # them), and cleared before every other call into the session and on the way out.
    current = False
    try:
        while True:
            if handled and (ready or deferred or life.closing or not connection_life.started):
                break
            with lock:
                if consumer._closed:
                    break
                listener = consumer._listener
                if listener is None:
                    break
                message: Any = buf.pop()
            if message is None:
                break
            handled += 1
            if listener is not last_listener:
                last_listener = listener
                call = getattr(listener, "on_message", None)
                if call is None:
                    call = listener
            if not current:
                session._current = consumer
                current = True
            ok = True
            try:
                if coalesce:
                    message._acknowledger = acknowledger
                else:
                    ack.delivered(consumer, message)
                call(message)
            except Exception as exc:
                ok = False
                session._listener_failed(listener, message, exc)
            if ack.recover_requested:
                ack.recover_requested = False
                ok = False
            if life.closed:
                return handled
            if coalesce and ok:
                hold((consumer, message._delivery_tag))
                pending += 1
                if (
                    pending >= ack_batch
                    or (buf.unconsumed - pending + buf.outstanding) * 100 <= trigger
                ):
                    pending = 0
                    session._current = None
                    current = False
                    session._flush_acks()
                continue
            session._current = None
            current = False
            if pending:
                pending = 0
                session._flush_acks()
            session._listener_done(consumer, message, ok)
            if not ok:
                break
        if current:
            session._current = None
            current = False
        if pending:
            session._offer_acks()
        return handled
    finally:
        if current:
            session._current = None


# -- the queued acknowledgements (``hold``), settled as a batch ---------------------------
# Per message of a batch, these are what remains of an AUTO acknowledgement once drain has
# queued it: the compiled twins do each in one C loop (about 110 ns per message less on
# the vm:// listener path than the comprehension, map and Counter below).


def take_held(pending: deque[tuple[Any, int]]) -> list[tuple[Any, int]]:
    """Pop what is queued now, oldest first; appends made meanwhile stay queued (one
    ``popleft`` per item: between two bytecodes another thread may append)."""
    popleft = pending.popleft
    return [popleft() for _ in range(len(pending))]


def held_tags(items: list[tuple[Any, int]]) -> list[int]:
    """The delivery tags of ``(consumer, tag)`` items, in order."""
    return list(map(_tag_of, items))


def consumed_counts(items: list[tuple[Any, int]], floor: int) -> list[tuple[Any, int]]:
    """How many of ``items`` each consumer delivered, counting only tags above ``floor``
    (those at or below died with a dropped connection), in the order consumers first
    appear."""
    if floor > 0:
        items = [item for item in items if item[1] > floor]
    return list(Counter(map(_consumer_of, items)).items())


_check: DrainFunction = drain
