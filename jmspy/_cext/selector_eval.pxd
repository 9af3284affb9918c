# cython: language_level=3
"""Typed interface of jmspy._cext.selector_eval (the compiled twin of jmspy._pure.selector_eval).

Beside the module's .pyi, where Cython finds it by qualified name (setup.py passes the
repository root as include path). Another compiled module (broker queue dispatch, say)
can ``cimport`` :class:`Predicate` and test a message with ``root.truth(get)`` without a
Python-level call. After editing, touch cython_ext/selector_eval.pyx before rebuilding.
"""


cdef class Expr:
    # A compiled sub-expression. ``value`` gives the Python value (None for NULL /
    # UNKNOWN); ``truth`` the value in a boolean context: 1 TRUE, 0 FALSE, -1 UNKNOWN,
    # -2 with an exception set (the getter raised).
    cdef object value(self, object get)
    cdef int truth(self, object get) except -2


cdef class Predicate:
    cdef Expr root

    cpdef bint matches(self, object get) except -1
    cpdef object evaluate(self, object get)
