"""A run of deliveries entering a consumer's buffer (pure twin; transport thread side).

The compiled twin is ``cython_ext/deliver.pyx`` (``jmspy._cext.deliver``);
``tests/test_deliver_twins.py`` runs both over the same random connections, consumers and
sessions and requires the same buffers, tag watermark, wake-ups and ready queue. Change
one, change the other.

Why a twin: on ``vm://`` the broker hands a run of deliveries straight to
``Connection.on_deliveries`` on the producer's thread, so everything between the broker
and the consumer's buffer is paid by every send. That was three Python methods (the
connection's, the consumer's, the session's ``_schedule``) and two ``with`` blocks, one of
them on a ``threading.Condition`` whose ``__enter__``/``__exit__`` are Python functions
too. :func:`deliver_run` does the same steps, under the same locks, in one call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jmspy.connection import Connection
    from jmspy.message import Message

__all__ = ["deliver_run"]


def deliver_run(
    conn: Connection, consumer_id: int, first_tag: int, messages: list[Message]
) -> None:
    """``conn.on_deliveries``: buffer a run of deliveries (tags ``first_tag`` on) for
    consumer ``consumer_id`` and wake whoever waits for them.

    Steps, in order: a consumer closed meanwhile gets nothing (the broker redelivers what
    it never got acked); the connection's highest tag seen is raised; under the consumer's
    lock, a consumer closed since is skipped, the messages are pushed to its prefetch
    buffer, and a thread blocked in ``receive()`` is notified when there is no listener;
    with a listener, the consumer is put on its session's ready queue (``_schedule``:
    skipped while the dispatcher is draining this very consumer, which re-checks the
    buffer afterwards; otherwise once, waking an idle dispatcher).
    """
    consumer = conn._consumers.get(consumer_id)
    if consumer is None:
        return
    last = first_tag + len(messages) - 1
    if last > conn._last_tag:
        conn._last_tag = last
    with consumer._lock:
        if consumer._closed:
            return  # late delivery after close: the close path cancels what is unacked
        consumer._buffer.push_many(messages)
        has_listener = consumer._listener is not None
        if not has_listener and consumer._receiving:
            consumer._cond.notify()
    if has_listener:
        session = consumer._session
        if session._draining is consumer:
            return
        cond = session._dispatch_cond
        with cond:
            if not consumer._scheduled:
                consumer._scheduled = True
                session._ready.append(consumer)
                if session._idle:
                    cond.notify()
