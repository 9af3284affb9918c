# cython: language_level=3
"""Typed interface of jmspy._cext.lifecycle (the compiled twin of jmspy._pure.lifecycle).

The listener dispatch (``cython_ext/dispatch.pyx``) and the producer's send
(``cython_ext/producer_core.pyx``) cimport these to read the flags as C fields. After
editing, touch cython_ext/lifecycle.pyx and those two before rebuilding.
"""

cimport cython


@cython.final
cdef class ConnectionLife:
    cdef public bint started
    cdef public bint closing
    cdef public bint closed


@cython.final
cdef class SessionLife:
    cdef public bint closing
    cdef public bint closed
