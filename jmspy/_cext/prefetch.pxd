# cython: language_level=3
"""Typed interface of jmspy._cext.prefetch (the compiled twin of jmspy._pure.prefetch).

It lives beside the module's .pyi, where Cython finds it by the module's qualified name
(setup.py passes the repository root as include path). Other compiled modules can
``from jmspy._cext.prefetch cimport PrefetchBuffer``. cythonize's change tracking does not
see this file: after editing it, touch cython_ext/prefetch.pyx before rebuilding.
"""


cdef class PrefetchBuffer:
    # Public counters: read-only from Python (properties), typed C integers.
    cdef readonly Py_ssize_t limit
    cdef readonly int threshold
    cdef readonly Py_ssize_t buffered
    cdef readonly Py_ssize_t unconsumed
    cdef readonly Py_ssize_t outstanding
    cdef readonly Py_ssize_t delivered_total
    cdef readonly Py_ssize_t consumed_total
    cdef readonly Py_ssize_t batches
    cdef readonly Py_ssize_t pauses

    # Ring buffer: a Python list used as a power-of-two ring (the list keeps the items
    # visible to the cyclic GC); the oldest item is at _ring[_head].
    cdef list _ring
    cdef Py_ssize_t _head
    cdef Py_ssize_t _mask
    cdef bint _started

    cpdef object push(self, object item)
    cpdef object push_many(self, object items)
    cpdef object pop(self)
    cpdef object push_front(self, object items)
    cpdef Py_ssize_t consumed(self, Py_ssize_t n=*) except -1
    cpdef Py_ssize_t wanted(self) noexcept
    cpdef object granted(self, Py_ssize_t n)
    cpdef Py_ssize_t pull_credit(self) noexcept
    cpdef object revoked(self, Py_ssize_t n)
    cpdef list drain(self)
    cpdef object forget(self, Py_ssize_t n)
    cpdef Py_ssize_t initial_credit(self) except -1
    cpdef tuple stats(self)

    cdef int _reserve(self, Py_ssize_t need) except -1
