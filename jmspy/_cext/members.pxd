# cython: language_level=3
"""Member descriptors for a record's object fields (an include: no module, no twin).

Cython exposes a ``cdef public object`` field to Python through a getset descriptor: a C
function call per access, which CPython 3.11 cannot specialise. A ``__slots__`` field is a
member descriptor, which its interpreter turns into one load at a fixed offset
(``LOAD_ATTR_SLOT``/``STORE_ATTR_SLOT``). Measured on a message's fields: 22 ns against
7 ns a read, and the application's listener and the client's own Python code read them
per message. :func:`expose_members` gives a record's object fields member descriptors, so
Python code reads them as fast as slots while the compiled twins keep their typed access.

The fields must be declared consecutively, first in the record (right after the object
header: a class with no base and no ``cdef`` methods); that is checked when the record's
module loads, by writing a marker through each field's own descriptor and finding it in
the instance. A member descriptor lets ``del obj.field`` empty a field, which compiled code
reading it would not survive, so a compiled twin reading a record an application owns
calls :func:`check_members` first on the fields it reads (a few ns).
"""

from cpython.mem cimport PyMem_Malloc
from cpython.object cimport PyObject, PyTypeObject


cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
        int flags
        const char* doc
    int T_OBJECT_EX


cdef extern from "Python.h":
    object PyDescr_NewMember(PyTypeObject* type, PyMemberDef* member)
    void PyType_Modified(PyTypeObject* type)
    const char* PyUnicode_AsUTF8(object text) except NULL


cdef inline int expose_members(type cls, tuple names) except -1:
    """Give ``cls``'s object fields ``names`` (its first fields, in declaration order)
    member descriptors; ImportError if they are not where this expects them."""
    cdef Py_ssize_t i, n = len(names)
    cdef Py_ssize_t first = sizeof(PyObject)
    cdef object probe = cls.__new__(cls)
    cdef PyObject** fields = <PyObject**>(<char*><PyObject*>probe + first)
    if (<PyTypeObject*>cls).tp_basicsize < first + n * <Py_ssize_t>sizeof(PyObject*):
        raise ImportError(f"{cls.__qualname__} is smaller than its {n} fields")
    markers = [object() for i in range(n)]
    for i in range(n):
        setattr(probe, names[i], markers[i])
    for i in range(n):
        if fields[i] != <PyObject*>markers[i]:
            raise ImportError(
                f"{cls.__qualname__}.{names[i]} is not its field number {i}: declare the "
                "record's fields first and in the order of its names, then rebuild"
            )
    # Never freed: the descriptors point into it for as long as the type lives.
    cdef PyMemberDef* defs = <PyMemberDef*>PyMem_Malloc(n * sizeof(PyMemberDef))
    if defs == NULL:
        raise MemoryError()
    cdef dict namespace = <dict><object>(<PyTypeObject*>cls).tp_dict
    for i in range(n):
        defs[i].name = PyUnicode_AsUTF8(names[i])  # the str lives in ``names``: forever
        defs[i].type = T_OBJECT_EX
        defs[i].offset = first + i * <Py_ssize_t>sizeof(PyObject*)
        defs[i].flags = 0
        defs[i].doc = NULL
        namespace[names[i]] = PyDescr_NewMember(<PyTypeObject*>cls, &defs[i])
    PyType_Modified(<PyTypeObject*>cls)
    return 0


cdef inline tuple member_indices(tuple names, tuple read):
    """The positions in ``names`` of the fields in ``read``: what a compiled reader hands
    to :func:`check_members`, computed once when its module loads."""
    return tuple([names.index(name) for name in read])


cdef inline int check_members(object record, tuple names, tuple indices) except -1:
    """AttributeError naming the first field at ``indices`` (positions in ``names``) an
    application deleted from ``record`` (whose type went through :func:`expose_members`).
    A reader checks the fields it reads, no others: the pure twin, reading them as
    attributes, fails on exactly those."""
    cdef PyObject** fields = <PyObject**>(<char*><PyObject*>record + sizeof(PyObject))
    cdef Py_ssize_t i
    for i in indices:
        if fields[i] == NULL:
            raise AttributeError(
                f"{type(record).__name__!r} object has no attribute {names[i]!r} (it was "
                "deleted; set it to a value instead)"
            )
    return 0
