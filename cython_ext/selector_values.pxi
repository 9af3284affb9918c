# Included by selector_eval.pyx (one extension module; this file holds its value rules):
# the kind of a value, three-valued truth, comparison and arithmetic with C fast paths that
# give exactly Python's answer. Mirrors _is_num / _kind / _compare / _divide of the pure
# twin, jmspy/_pure/selector_eval.py; the rules are documented in jmspy.selector.evaluate.


cdef inline bint _is_num(object v) except -1:
    cdef type t = type(v)
    if t is int or t is float:
        return True
    return t is not bool and isinstance(v, (int, float))


cdef inline int _kind(object v) except -1:
    cdef type t = type(v)
    if t is str:
        return _K_STR
    if t is int or t is float:
        return _K_NUM
    if t is bool:
        return _K_BOOL
    if isinstance(v, str):
        return _K_STR
    if isinstance(v, (int, float)):
        return _K_NUM
    return _K_OTHER


cdef inline object _truth_obj(int t):
    if t == 1:
        return True
    if t == 0:
        return False
    return None


cdef inline int _as_truth(object v) noexcept:
    if v is True:
        return 1
    if v is False:
        return 0
    return -1


cdef inline int _c_cmp_double(double a, double b, int op) noexcept:
    # IEEE comparisons: every one involving NaN is false except <>, as in Python.
    if op == Py_EQ:
        return a == b
    if op == Py_NE:
        return a != b
    if op == Py_LT:
        return a < b
    if op == Py_LE:
        return a <= b
    if op == Py_GT:
        return a > b
    return a >= b


cdef inline int _c_cmp_ll(long long a, long long b, int op) noexcept:
    if op == Py_EQ:
        return a == b
    if op == Py_NE:
        return a != b
    if op == Py_LT:
        return a < b
    if op == Py_LE:
        return a <= b
    if op == Py_GT:
        return a > b
    return a >= b


cdef inline int _rich(object a, object b, int op) except -2:
    """``bool(a <op> b)``: Python's answer, including subclass overrides."""
    if PyObject_RichCompare(a, b, op):
        return 1
    return 0


cdef int _num_cmp(object a, object b, int op) except -2:
    cdef type ta = type(a)
    cdef type tb = type(b)
    cdef long long x, y
    cdef int ox = 0, oy = 0
    if ta is float and tb is float:
        return _c_cmp_double(PyFloat_AS_DOUBLE(a), PyFloat_AS_DOUBLE(b), op)
    if ta is int and tb is int:
        x = PyLong_AsLongLongAndOverflow(a, &ox)
        y = PyLong_AsLongLongAndOverflow(b, &oy)
        if ox == 0 and oy == 0:
            return _c_cmp_ll(x, y, op)
    return _rich(a, b, op)


cdef int _compare(int op, object a, object b) except -2:
    if a is None or b is None:
        return -1
    cdef int ka = _kind(a)
    if ka != _kind(b) or ka == _K_OTHER:
        return 0
    if ka == _K_NUM:
        return _num_cmp(a, b, op)
    if op == Py_EQ or op == Py_NE:
        return _rich(a, b, op)
    return 0


cdef object _arith(str op, object a, object b):
    """``a <op> b`` for ``+ - *`` on two numbers; None when the result overflows."""
    cdef double x, y
    if type(a) is float and type(b) is float:
        x = PyFloat_AS_DOUBLE(a)
        y = PyFloat_AS_DOUBLE(b)
        if op == "+":
            return x + y
        if op == "-":
            return x - y
        return x * y
    try:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        return a * b
    except OverflowError:  # e.g. a huge int mixed with a float
        return None


@cython.cdivision(True)
cdef object _divide(object a, object b):
    """``/``: UNKNOWN for non-numbers, division by zero and overflow; ints truncate."""
    cdef long long x, y
    cdef int ox = 0, oy = 0
    if not _is_num(a) or not _is_num(b):
        return None
    if type(a) is float and type(b) is float:
        if PyFloat_AS_DOUBLE(b) == 0.0:
            return None
        return PyFloat_AS_DOUBLE(a) / PyFloat_AS_DOUBLE(b)
    if b == 0:
        return None
    if type(a) is int and type(b) is int:
        x = PyLong_AsLongLongAndOverflow(a, &ox)
        y = PyLong_AsLongLongAndOverflow(b, &oy)
        if ox == 0 and oy == 0 and x != LLONG_MIN:
            return PyLong_FromLongLong(x // y)  # C division truncates toward zero
    try:
        if isinstance(a, int) and isinstance(b, int):
            quotient = abs(a) // abs(b)
            return quotient if (a < 0) == (b < 0) else -quotient
        return a / b
    except OverflowError:  # e.g. a huge int divided by a float
        return None
