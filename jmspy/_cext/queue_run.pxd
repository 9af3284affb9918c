# cython: language_level=3
"""Typed interface of jmspy._cext.queue_run (the compiled twin of jmspy._pure.queue_run).

Beside the module's .pyi, where Cython finds it by qualified name (setup.py passes the
repository root as include path). After editing, touch cython_ext/queue_run.pyx.
"""


cpdef tuple take_run(object queue, object c, Py_ssize_t room)
cpdef list acknowledge_tags(dict owners, list tags)
cpdef enqueue(object queue, object message)
cpdef dispatch_fast(object queue)
cpdef route_send(object conn, object message, object tx=*)
