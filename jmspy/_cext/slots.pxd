# cython: language_level=3
"""Direct ``__slots__`` access for the compiled twins (an include: no module, no twin).

A ``__slots__`` attribute lives at a fixed offset inside the instance; its member
descriptor knows the offset. Reading and writing it there skips the generic attribute
lookup (type MRO walk, descriptor call) that otherwise costs more than the work the hot
loops do per message. :func:`slot_offset` checks at import time that the name really is a
slot of the class (so a changed class fails loudly instead of being written wrongly), and
:func:`get_slot` falls back to ``getattr`` for an empty slot so the error is the usual
AttributeError. Only use offsets on instances of the class they were taken from (or its
subclasses, which keep their bases' slot layout).
"""

from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    PyTypeObject PyMemberDescr_Type


cdef inline Py_ssize_t slot_offset(object cls, str name) except -1:
    """The byte offset of slot ``name`` in instances of ``cls`` (checked)."""
    descr = None
    for klass in cls.__mro__:
        descr = klass.__dict__.get(name)
        if descr is not None:
            break
    if descr is None or type(descr) is not <object>(<PyObject*>&PyMemberDescr_Type):
        raise ImportError(
            f"{cls.__module__}.{cls.__name__}.{name} is not a __slots__ member; rebuild "
            "jmspy's compiled twins against this version of the class"
        )
    return (<PyMemberDescrObject*><PyObject*>descr).d_member.offset


cdef inline object get_slot(object obj, Py_ssize_t offset, str name):
    """``obj.<name>`` read straight from its slot (``getattr`` if the slot is empty)."""
    cdef PyObject* value = (<PyObject**>((<char*><PyObject*>obj) + offset))[0]
    if value is NULL:
        return getattr(obj, name)
    return <object>value


cdef inline void set_slot(object obj, Py_ssize_t offset, object value) noexcept:
    """``obj.<name> = value`` stored straight into its slot."""
    cdef PyObject** slot = <PyObject**>((<char*><PyObject*>obj) + offset)
    cdef PyObject* old = slot[0]
    Py_INCREF(value)
    slot[0] = <PyObject*>value
    Py_XDECREF(old)
