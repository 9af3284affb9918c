# cython: language_level=3
"""Typed interface of jmspy._cext.queue_run (the compiled twin of
jmspy.broker_ref.core.queue_run). After editing, touch cython_ext/queue_run.pyx."""

from jmspy._cext.records cimport ConnectionRecord, QueueRecord, ServerConsumer


cpdef tuple take_run(QueueRecord queue, ServerConsumer c, Py_ssize_t room)
cpdef bint tags_known_once(object known, object staged, list tags) except -1
cpdef list acknowledge_tags(dict owners, list tags)
cpdef enqueue(QueueRecord queue, object message)
cpdef dispatch_fast(QueueRecord queue)
cpdef bint route_fast(ConnectionRecord conn, object message) except -1
