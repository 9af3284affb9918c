# cython: language_level=3
"""A run of deliveries entering a consumer's buffer (compiled twin).

The pure twin ``jmspy/_pure/deliver.py`` documents the steps and why they are one call;
``tests/test_deliver_twins.py`` runs both over the same random states. Change one, change
the other.

What compiling buys: the connection's, the consumer's and the session's attributes are
read from their instance dicts without interpreted bytecode around them, and the
session's ``threading.Condition`` is held through its lock's own ``acquire``/``release``
(what ``Condition.__enter__``/``__exit__`` call, minus their two Python frames).
``Condition.notify`` stays the Python method: it runs only when the dispatcher is idle.
"""

__all__ = ["deliver_run"]


cpdef deliver_run(object conn, object consumer_id, object first_tag, list messages):
    """``conn.on_deliveries``; see the pure twin (the same steps under the same locks)."""
    cdef object consumer = (<dict?>conn._consumers).get(consumer_id)
    if consumer is None:
        return
    cdef object last = first_tag + len(messages) - 1
    if last > conn._last_tag:
        conn._last_tag = last
    cdef bint has_listener
    with consumer._lock:
        if consumer._closed:
            return  # late delivery after close: the close path cancels what is unacked
        consumer._buffer.push_many(messages)
        has_listener = consumer._listener is not None
        if not has_listener and consumer._receiving:
            consumer._cond.notify()
    if not has_listener:
        return
    cdef object session = consumer._session
    if session._draining is consumer:
        return
    cdef object cond = session._dispatch_cond
    cond.acquire()
    try:
        if not consumer._scheduled:
            consumer._scheduled = True
            session._ready.append(consumer)
            if session._idle:
                cond.notify()
    finally:
        cond.release()
