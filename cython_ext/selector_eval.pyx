# cython: language_level=3, auto_pickle=False
"""Selector evaluation: a parsed selector compiled into a tree of typed nodes (compiled twin).

The pure twin is ``jmspy/_pure/selector_eval.py``: it is the readable reference, and
``tests/test_selector_twins.py`` feeds both the same random selectors and messages,
requiring the same result, the same error and the same getter calls in the same order.
Change one, change the other. The value rules are documented in
:mod:`jmspy.selector.evaluate`; the typed interface is in ``jmspy._cext.selector_eval.pxd``.

Why this shape: the pure twin spends its time in Python frames, one closure call per
node per message plus ``type()``/``isinstance`` checks. Here each node is a ``cdef class``
whose ``value``/``truth`` is a C virtual call; boolean nodes return C ints (1 TRUE,
0 FALSE, -1 UNKNOWN, -2 with an exception set), so AND/OR/NOT/BETWEEN never build Python
bools, and the getter call is the only Python-level call left. The shapes that dominate
real selectors get C fast paths that give exactly Python's answer:

* comparing an exact ``float`` with a number constant representable as a C double, and
  an exact ``int`` with an int constant that fits a C ``long long``;
* ``+ - * /`` on two exact floats, and truncating ``/`` on two ints that fit in C;
* ``=``/``<>`` on exact ``str`` values, IN lookups, and LIKE patterns matched on the
  string's code points (same segment algorithm as :mod:`jmspy.selector.like`).

Everything else (int/float subclasses, ``str`` subclasses in LIKE, huge ints, mixed
int/float arithmetic) goes through the same Python operations the pure twin uses, so
overflow, subclass overrides and NaN behave identically. Comparisons use
``PyObject_RichCompare`` and a truth test, never ``PyObject_RichCompareBool``, whose
identity shortcut would make one NaN object equal to itself.
"""

cimport cython
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromLongLong
from cpython.object cimport Py_EQ, Py_GE, Py_GT, Py_LE, Py_LT, Py_NE, PyObject_RichCompare
from libc.limits cimport LLONG_MIN

from jmspy.selector.headers import DELIVERY_MODE, DELIVERY_MODE_NAMES, is_always_null
from jmspy.selector.like import like_matcher
from jmspy.selector.nodes import (
    Arith,
    Between,
    Compare,
    Ident,
    In,
    IsNull,
    Like,
    Literal,
    Logical,
    Not,
    Unary,
)

__all__ = ["Predicate", "compile_predicate"]

cdef extern from "Python.h":
    int PyUnicode_KIND(object o)
    void *PyUnicode_DATA(object o)
    Py_UCS4 PyUnicode_READ(int kind, void *data, Py_ssize_t index)

cdef enum:
    _K_OTHER = 0
    _K_NUM = 1
    _K_STR = 2
    _K_BOOL = 3

cdef dict _OPS = {"=": Py_EQ, "<>": Py_NE, "<": Py_LT, "<=": Py_LE, ">": Py_GT, ">=": Py_GE}
cdef dict _MIRRORED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
# Ints within +-2**53 convert to a C double exactly, so a float compares with them in C.
cdef object _DOUBLE_EXACT = 2 ** 53


# -- value helpers (mirror _is_num / _kind / _compare / _divide of the pure twin) ------------
include "selector_values.pxi"


# -- nodes ------------------------------------------------------------------------------------


cdef class Expr:
    """A compiled sub-expression. Subclasses override ``value``, ``truth`` or both."""

    cdef object value(self, object get):
        return _truth_obj(self.truth(get))

    cdef int truth(self, object get) except -2:
        return _as_truth(self.value(get))


cdef class _Const(Expr):
    cdef object v
    cdef int t

    def __cinit__(self, object v):
        self.v = v
        self.t = _as_truth(v)

    cdef object value(self, object get):
        return self.v

    cdef int truth(self, object get) except -2:
        return self.t


cdef class _Ident(Expr):
    cdef str name

    def __cinit__(self, str name):
        self.name = name

    cdef object value(self, object get):
        return get(self.name)


cdef class _DeliveryMode(Expr):
    """``JMSDeliveryMode``: a getter's int 1/2 or enum becomes the name the spec compares."""

    cdef str name

    def __cinit__(self, str name):
        self.name = name

    cdef object value(self, object get):
        v = get(self.name)
        if isinstance(v, int) and not isinstance(v, bool):
            return DELIVERY_MODE_NAMES.get(v, v)
        if v is not None and not isinstance(v, (str, bool)):
            enum_name = getattr(v, "name", None)  # e.g. a DeliveryMode enum
            if isinstance(enum_name, str):
                return enum_name
        return v


cdef class _Unary(Expr):
    cdef bint minus
    cdef Expr operand

    def __cinit__(self, bint minus, Expr operand):
        self.minus = minus
        self.operand = operand

    cdef object value(self, object get):
        v = self.operand.value(get)
        if not _is_num(v):
            return None
        if not self.minus:
            return v
        if type(v) is float:
            return -PyFloat_AS_DOUBLE(v)
        return -v


cdef class _Arith(Expr):
    cdef str op
    cdef Expr left
    cdef Expr right

    def __cinit__(self, str op, Expr left, Expr right):
        self.op = op
        self.left = left
        self.right = right

    cdef object value(self, object get):
        if self.op == "/":
            a = self.left.value(get)
            return _divide(a, self.right.value(get))
        a = self.left.value(get)
        if not _is_num(a):
            return None
        b = self.right.value(get)
        if not _is_num(b):
            return None
        return _arith(self.op, a, b)


cdef class _Compare(Expr):
    cdef int op
    cdef Expr left
    cdef Expr right

    def __cinit__(self, int op, Expr left, Expr right):
        self.op = op
        self.left = left
        self.right = right

    cdef int truth(self, object get) except -2:
        a = self.left.value(get)
        return _compare(self.op, a, self.right.value(get))


cdef class _CompareNum(Expr):
    """``operand <op> number``, the constant's C forms precomputed where exact."""

    cdef int op
    cdef Expr operand
    cdef object constant
    cdef bint has_double
    cdef double as_double
    cdef bint has_ll
    cdef long long as_ll

    def __cinit__(self, int op, Expr operand, object constant):
        cdef int overflow = 0
        self.op = op
        self.operand = operand
        self.constant = constant
        if type(constant) is float:
            self.has_double = True
            self.as_double = PyFloat_AS_DOUBLE(constant)
        elif type(constant) is int:
            if -_DOUBLE_EXACT <= constant <= _DOUBLE_EXACT:
                self.has_double = True
                self.as_double = <double>constant
            self.as_ll = PyLong_AsLongLongAndOverflow(constant, &overflow)
            self.has_ll = overflow == 0

    cdef int truth(self, object get) except -2:
        cdef long long x
        cdef int overflow = 0
        v = self.operand.value(get)
        if v is None:
            return -1
        cdef type t = type(v)
        if t is float and self.has_double:
            return _c_cmp_double(PyFloat_AS_DOUBLE(v), self.as_double, self.op)
        if t is int and self.has_ll:
            x = PyLong_AsLongLongAndOverflow(v, &overflow)
            if overflow == 0:
                return _c_cmp_ll(x, self.as_ll, self.op)
            return _rich(v, self.constant, self.op)
        if _is_num(v):
            return _rich(v, self.constant, self.op)
        return 0


cdef class _CompareStr(Expr):
    """``operand = 'text'`` / ``operand <> 'text'``."""

    cdef bint want
    cdef Expr operand
    cdef str constant

    def __cinit__(self, bint want, Expr operand, str constant):
        self.want = want
        self.operand = operand
        self.constant = constant

    cdef int truth(self, object get) except -2:
        v = self.operand.value(get)
        if v is None:
            return -1
        if type(v) is str:
            return (<str>v == self.constant) == self.want
        if isinstance(v, str):
            return _rich(v, self.constant, Py_EQ) == self.want
        return 0


cdef class _Not(Expr):
    cdef Expr operand

    def __cinit__(self, Expr operand):
        self.operand = operand

    cdef int truth(self, object get) except -2:
        cdef int t = self.operand.truth(get)
        if t < 0:
            return -1
        return 1 - t


cdef class _And(Expr):
    cdef tuple operands

    def __cinit__(self, tuple operands):
        self.operands = operands

    cdef int truth(self, object get) except -2:
        cdef int result = 1
        cdef int t
        for e in self.operands:
            t = (<Expr>e).truth(get)
            if t == 0:
                return 0
            if t != 1:
                result = -1
        return result


cdef class _Or(Expr):
    cdef tuple operands

    def __cinit__(self, tuple operands):
        self.operands = operands

    cdef int truth(self, object get) except -2:
        cdef int result = 0
        cdef int t
        for e in self.operands:
            t = (<Expr>e).truth(get)
            if t == 1:
                return 1
            if t != 0:
                result = -1
        return result


cdef class _Between(Expr):
    cdef Expr operand
    cdef Expr low
    cdef Expr high
    cdef bint negated

    def __cinit__(self, Expr operand, Expr low, Expr high, bint negated):
        self.operand = operand
        self.low = low
        self.high = high
        self.negated = negated

    cdef int truth(self, object get) except -2:
        cdef int first, second
        v = self.operand.value(get)
        if self.negated:
            # Spec: "a NOT BETWEEN x AND y" is "a < x OR a > y".
            first = _compare(Py_LT, v, self.low.value(get))
            if first == 1:
                return 1
            second = _compare(Py_GT, v, self.high.value(get))
            if second == 1:
                return 1
            return 0 if first == 0 and second == 0 else -1
        # Spec: "a BETWEEN x AND y" is "a >= x AND a <= y".
        first = _compare(Py_GE, v, self.low.value(get))
        if first == 0:
            return 0
        second = _compare(Py_LE, v, self.high.value(get))
        if second == 0:
            return 0
        return 1 if first == 1 and second == 1 else -1


cdef class _In(Expr):
    cdef Expr operand
    cdef frozenset values
    cdef bint negated

    def __cinit__(self, Expr operand, frozenset values, bint negated):
        self.operand = operand
        self.values = values
        self.negated = negated

    cdef int truth(self, object get) except -2:
        v = self.operand.value(get)
        if v is None:
            return -1
        if isinstance(v, str):
            return (v in self.values) != self.negated
        return 0


# -- LIKE, matched on code points ----------------------------------------------------------
include "selector_like.pxi"


cdef class _Like(Expr):
    cdef Expr operand
    cdef _LikeMatcher matcher
    cdef object fallback
    cdef bint negated

    def __cinit__(self, Expr operand, tuple parts, bint negated):
        self.operand = operand
        self.matcher = _LikeMatcher(parts)
        # str subclasses go through the pure matcher, which honours their overrides.
        self.fallback = like_matcher(parts)
        self.negated = negated

    cdef int truth(self, object get) except -2:
        v = self.operand.value(get)
        if v is None:
            return -1
        if type(v) is str:
            return self.matcher.match(<str>v) != self.negated
        if isinstance(v, str):
            return (1 if self.fallback(v) else 0) != self.negated
        return 0


cdef class _IsNull(Expr):
    cdef Expr operand
    cdef bint negated

    def __cinit__(self, Expr operand, bint negated):
        self.operand = operand
        self.negated = negated

    cdef int truth(self, object get) except -2:
        return (self.operand.value(get) is None) != self.negated


# -- the compiled selector ------------------------------------------------------------------


cdef class Predicate:
    """A compiled selector: ``matches`` for filtering, ``evaluate`` for its truth value."""

    def __cinit__(self, Expr root):
        self.root = root

    cpdef bint matches(self, object get) except -1:
        """True only if the selector evaluates to TRUE; FALSE and UNKNOWN give False."""
        return self.root.truth(get) == 1

    cpdef object evaluate(self, object get):
        """The three-valued result: True, False or None (UNKNOWN)."""
        return _truth_obj(self.root.truth(get))


def compile_predicate(node):
    """Compile a parsed selector; ``None`` (an empty selector) matches every message."""
    if node is None:
        return Predicate(_Const(True))
    return Predicate(_compile(node)[0])


# -- compiling (mirrors _compile / _build / _fold of the pure twin) --------------------------


def _never_called(name):
    raise AssertionError(f"constant expression looked up {name!r}")


cdef tuple _compile(node):
    """``(expr, is_constant)`` for ``node``."""
    if isinstance(node, Literal):
        return _Const(node.value), True
    if isinstance(node, Ident):
        if is_always_null(node.name):
            return _Const(None), True
        if node.name == DELIVERY_MODE:
            return _DeliveryMode(node.name), False
        return _Ident(node.name), False
    return _build(node)


cdef tuple _fold(Expr expr, list operands):
    """Evaluate ``expr`` now if all its operands are constants."""
    for _, const in operands:
        if not const:
            return expr, False
    return _Const(expr.value(_never_called)), True


cdef tuple _build(node):
    if isinstance(node, Unary):
        operand = _compile(node.operand)
        return _fold(_Unary(node.op == "-", operand[0]), [operand])
    if isinstance(node, Arith):
        left, right = _compile(node.left), _compile(node.right)
        return _fold(_Arith(node.op, left[0], right[0]), [left, right])
    if isinstance(node, Compare):
        left, right = _compile(node.left), _compile(node.right)
        return _fold(_comparison(node.op, left, right), [left, right])
    if isinstance(node, Not):
        operand = _compile(node.operand)
        return _fold(_Not(operand[0]), [operand])
    if isinstance(node, Logical):
        operands = [_compile(child) for child in node.operands]
        exprs = tuple([c[0] for c in operands])
        return _fold(_And(exprs) if node.op == "AND" else _Or(exprs), operands)
    if isinstance(node, Between):
        operand, low, high = _compile(node.operand), _compile(node.low), _compile(node.high)
        return _fold(_Between(operand[0], low[0], high[0], node.negated), [operand, low, high])
    if isinstance(node, In):
        operand = _compile(node.operand)
        return _fold(_In(operand[0], node.values, node.negated), [operand])
    if isinstance(node, Like):
        operand = _compile(node.operand)
        return _fold(_Like(operand[0], node.parts, node.negated), [operand])
    if isinstance(node, IsNull):
        operand = _compile(node.operand)
        return _fold(_IsNull(operand[0], node.negated), [operand])
    raise AssertionError(f"unexpected node {node!r}")  # Literal/Ident handled by _compile


cdef Expr _comparison(str op, tuple left, tuple right):
    if left[1] and not right[1]:
        # Put the constant on the right so the specialised forms below apply.
        return _comparison(_MIRRORED[op], right, left)
    cdef int code = _OPS[op]
    if right[1] and not left[1]:
        constant = (<_Const>right[0]).v
        if constant is None:
            # Compared with NULL: UNKNOWN without evaluating the operand, as the pure twin.
            # (Not a constant for folding: _fold goes by the operands, as in the pure twin.)
            return _Const(None)
        kind = _kind(constant)
        if kind == _K_NUM:
            return _CompareNum(code, left[0], constant)
        if kind == _K_STR and (code == Py_EQ or code == Py_NE) and type(constant) is str:
            return _CompareStr(code == Py_EQ, left[0], constant)
    return _Compare(code, left[0], right[0])
