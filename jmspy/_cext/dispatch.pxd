# cython: language_level=3
"""Typed interface of jmspy._cext.dispatch (the compiled twin of jmspy._pure.dispatch).

Beside the module's .pyi, where Cython finds it by qualified name (setup.py passes the
repository root as include path). After editing, touch cython_ext/dispatch.pyx.
"""


cpdef Py_ssize_t drain(object session, object connection, object consumer) except -1
cpdef list take_held(object pending)
cpdef list held_tags(list items)
cpdef list consumed_counts(list items, object floor)
