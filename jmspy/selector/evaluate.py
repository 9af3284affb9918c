"""Evaluating a parsed selector: the value rules, and the compiler that implements them.

Selectors run once per message per consumer in a broker, and on the client for
transports whose broker cannot filter, so evaluation is one of the hot paths. The tree is
turned into closures once at compile time: no per-message tree walking, no ``eval`` of
user text, constant sub-expressions folded away, and the common ``identifier <op>
literal`` shape specialised so it costs one getter call and a couple of type checks.

Evaluation order is part of the contract (a getter may raise, or count its calls):
operands are evaluated left to right, AND/OR stop at the first FALSE/TRUE, arithmetic
``+ - *`` skips its right operand when the left one is not a number, ``/`` evaluates
both, BETWEEN stops as soon as its AND/OR expansion is decided, and constant
sub-expressions never call the getter.

A compiled (Cython) twin of this module was retired by the twin ledger's rule
(benchmarks/README.md): it evaluated 3.7x faster alone, but end to end, with one
selector consumer or with eight consumers routing a queue by content, it was worth
1.00-1.07x, under the 1.10x a twin must show.

Values are three-valued: ``True``, ``False`` and ``None`` (UNKNOWN / SQL NULL). Rules,
from JMS 2.0 section 3.8.1.1:

* Any comparison or arithmetic involving NULL is UNKNOWN.
* Only like types compare; ``int`` and ``float`` are both numeric and compare with each
  other. Comparing unlike types (a string with a number, a bool with 1, ...) is FALSE,
  not UNKNOWN. Strings and booleans support only ``=`` and ``<>``; an ordering
  comparison between two strings (possible only between two identifiers, the parser
  rejects it for literals) is FALSE. ``bool`` is never numeric.
* Values of types other than ``str``, ``bool``, ``int`` and ``float`` are unlike every
  type: comparisons with them are FALSE and arithmetic on them is UNKNOWN.
* Arithmetic on a non-number is UNKNOWN. Division by zero is UNKNOWN. Dividing two
  exact numerics truncates toward zero, as Java's ``long`` division does, so selectors
  behave as they do on Java brokers; Python ints do not overflow, unlike Java's. A result
  Python cannot represent (an int too large for a float, mixed with a float) is UNKNOWN.
* A boolean context (AND/OR/NOT, the top level) treats any value other than ``True`` /
  ``False`` as UNKNOWN, so a property holding ``5`` matches neither ``p`` nor ``NOT p``.
* ``BETWEEN``, ``NOT BETWEEN`` and ``IN`` expand exactly as the spec defines them
  (``a >= x AND a <= y``; ``a < x OR a > y``; ``a = 'x' OR ...``), so a string ``a``
  makes both ``a BETWEEN 1 AND 2`` and ``a NOT BETWEEN 1 AND 2`` FALSE. Likewise a
  non-string identifier makes ``IN``/``NOT IN`` and ``LIKE``/``NOT LIKE`` FALSE.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final, TypeGuard

from jmspy.selector.headers import (
    DELIVERY_MODE,
    DELIVERY_MODE_NAMES,
    NULL_HEADERS,
    SELECTABLE_HEADERS,
    is_always_null,
)
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
    Node,
    Not,
    Unary,
)

__all__ = [
    "NULL_HEADERS",
    "SELECTABLE_HEADERS",
    "Getter",
    "Predicate",
    "compile_predicate",
]

#: Looks up an identifier's value for the current message; ``None`` when absent.
Getter = Callable[[str], object]
#: A compiled (sub-)expression: ``True``/``False``/``None`` or a value.
Eval = Callable[[Getter], object]

_KIND_OTHER: Final = 0
_KIND_NUM: Final = 1
_KIND_STR: Final = 2
_KIND_BOOL: Final = 3

# Any: operands are already known to be mutually comparable when these are called.
_COMPARE_FUNCS: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_MIRRORED: Final = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class Predicate:
    """A compiled selector: ``matches`` for filtering, ``evaluate`` for its truth value."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Eval) -> None:
        self._fn = fn

    def matches(self, get: Getter) -> bool:
        """True only if the selector evaluates to TRUE; FALSE and UNKNOWN give False."""
        return self._fn(get) is True

    def evaluate(self, get: Getter) -> bool | None:
        """The three-valued result: True, False or None (UNKNOWN)."""
        value = self._fn(get)
        return value if value is True or value is False else None


def _match_all(get: Getter) -> object:
    return True


def compile_predicate(node: Node | None) -> Predicate:
    """Compile a parsed selector; ``None`` (an empty selector) matches every message."""
    if node is None:
        return Predicate(_match_all)
    return Predicate(_compile(node).fn)


def _is_num(value: object) -> TypeGuard[int | float]:
    """Numeric in the JMS sense: int or float, but never bool."""
    t = type(value)
    if t is int or t is float:
        return True
    return t is not bool and isinstance(value, int | float)


def _kind(value: object) -> int:
    t = type(value)
    if t is str:
        return _KIND_STR
    if t is int or t is float:
        return _KIND_NUM
    if t is bool:
        return _KIND_BOOL
    if isinstance(value, str):
        return _KIND_STR
    if isinstance(value, int | float):
        return _KIND_NUM
    return _KIND_OTHER


def _compare(op: str, a: object, b: object) -> bool | None:
    """Reference comparison; the specialised closures below must agree with it."""
    if a is None or b is None:
        return None
    ka = _kind(a)
    if ka != _kind(b) or ka == _KIND_OTHER:
        return False
    if ka == _KIND_NUM or op == "=" or op == "<>":
        return bool(_COMPARE_FUNCS[op](a, b))
    return False


def _divide(a: object, b: object) -> int | float | None:
    """``/``: UNKNOWN for non-numbers, division by zero and overflow; ints truncate."""
    if not _is_num(a) or not _is_num(b):
        return None
    if b == 0:
        return None
    try:
        if isinstance(a, int) and isinstance(b, int):
            quotient = abs(a) // abs(b)
            return quotient if (a < 0) == (b < 0) else -quotient
        return a / b
    except OverflowError:  # e.g. a huge int divided by a float
        return None


def _constant(value: object) -> Eval:
    def const(get: Getter) -> object:
        return value

    return const


class _Compiled:
    """A compiled sub-expression plus whether it is a constant (and its value)."""

    __slots__ = ("const", "fn", "value")

    def __init__(self, fn: Eval, const: bool = False, value: object = None) -> None:
        self.fn = fn
        self.const = const
        self.value = value


def _never_called(name: str) -> object:
    raise AssertionError(f"constant expression looked up {name!r}")


def _compile(node: Node) -> _Compiled:
    if isinstance(node, Literal):
        return _Compiled(_constant(node.value), True, node.value)
    if isinstance(node, Ident):
        return _compile_ident(node.name)
    return _build(node)


def _fold(fn: Eval, operands: list[_Compiled]) -> _Compiled:
    """Evaluate ``fn`` now if all its operands are constants."""
    if all(c.const for c in operands):
        value = fn(_never_called)
        return _Compiled(_constant(value), True, value)
    return _Compiled(fn)


def _build(node: Node) -> _Compiled:
    if isinstance(node, Unary):
        operand = _compile(node.operand)
        return _fold(_unary(node.op, operand.fn), [operand])
    if isinstance(node, Arith):
        left, right = _compile(node.left), _compile(node.right)
        return _fold(_binary_arith(node.op, left.fn, right.fn), [left, right])
    if isinstance(node, Compare):
        left, right = _compile(node.left), _compile(node.right)
        return _fold(_comparison(node.op, left, right), [left, right])
    if isinstance(node, Not):
        operand = _compile(node.operand)
        return _fold(_not(operand.fn), [operand])
    if isinstance(node, Logical):
        operands = [_compile(child) for child in node.operands]
        fns = [c.fn for c in operands]
        fn = _and(fns) if node.op == "AND" else _or(fns)
        return _fold(fn, operands)
    if isinstance(node, Between):
        operand, low, high = _compile(node.operand), _compile(node.low), _compile(node.high)
        return _fold(_between(operand.fn, low.fn, high.fn, node.negated), [operand, low, high])
    if isinstance(node, In):
        operand = _compile(node.operand)
        return _fold(_in(operand.fn, node.values, node.negated), [operand])
    if isinstance(node, Like):
        operand = _compile(node.operand)
        return _fold(_like(operand.fn, like_matcher(node.parts), node.negated), [operand])
    if isinstance(node, IsNull):
        operand = _compile(node.operand)
        return _fold(_is_null(operand.fn, node.negated), [operand])
    raise AssertionError(f"unexpected node {node!r}")  # Literal/Ident handled by _compile


def _compile_ident(name: str) -> _Compiled:
    if is_always_null(name):
        return _Compiled(_constant(None), True, None)
    if name == DELIVERY_MODE:

        def delivery_mode(get: Getter) -> object:
            value = get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return DELIVERY_MODE_NAMES.get(value, value)
            if value is not None and not isinstance(value, str | bool):
                enum_name = getattr(value, "name", None)  # e.g. a DeliveryMode enum
                if isinstance(enum_name, str):
                    return enum_name
            return value

        return _Compiled(delivery_mode)

    def ident(get: Getter) -> object:
        return get(name)

    return _Compiled(ident)


def _unary(op: str, operand: Eval) -> Eval:
    if op == "+":

        def plus(get: Getter) -> object:
            value = operand(get)
            return value if _is_num(value) else None

        return plus

    def minus(get: Getter) -> object:
        value = operand(get)
        return -value if _is_num(value) else None

    return minus


def _binary_arith(op: str, left: Eval, right: Eval) -> Eval:
    if op == "/":

        def divide(get: Getter) -> object:
            return _divide(left(get), right(get))

        return divide
    func: Callable[[int | float, int | float], int | float] = {
        "+": operator.add,
        "-": operator.sub,
        "*": operator.mul,
    }[op]

    def arith(get: Getter) -> object:
        a = left(get)
        if not _is_num(a):
            return None
        b = right(get)
        if not _is_num(b):
            return None
        try:
            return func(a, b)
        except OverflowError:  # e.g. a huge int mixed with a float
            return None

    return arith


def _comparison(op: str, left: _Compiled, right: _Compiled) -> Eval:
    if left.const and not right.const:
        # Put the constant on the right so the specialised forms below apply.
        return _comparison(_MIRRORED[op], right, left)
    if right.const and not left.const:
        return _compare_with_constant(op, left.fn, right.value)
    lf, rf = left.fn, right.fn

    def compare(get: Getter) -> object:
        return _compare(op, lf(get), rf(get))

    return compare


def _compare_with_constant(op: str, operand: Eval, constant: object) -> Eval:
    if constant is None:
        return _constant(None)
    kind = _kind(constant)
    if kind == _KIND_NUM:
        func = _COMPARE_FUNCS[op]

        def numeric(get: Getter) -> object:
            value = operand(get)
            if value is None:
                return None
            if _is_num(value):
                return bool(func(value, constant))
            return False

        return numeric
    if kind == _KIND_STR and op in ("=", "<>"):
        want = op == "="

        def string(get: Getter) -> object:
            value = operand(get)
            if value is None:
                return None
            if isinstance(value, str):
                return bool(value == constant) is want
            return False

        return string

    def generic(get: Getter) -> object:
        return _compare(op, operand(get), constant)

    return generic


def _not(operand: Eval) -> Eval:
    def not_(get: Getter) -> object:
        value = operand(get)
        if value is True:
            return False
        if value is False:
            return True
        return None

    return not_


def _and(operands: list[Eval]) -> Eval:
    if len(operands) == 2:
        first, second = operands

        def and2(get: Getter) -> object:
            a = first(get)
            if a is False:
                return False
            b = second(get)
            if b is False:
                return False
            return True if a is True and b is True else None

        return and2
    frozen = tuple(operands)

    def and_n(get: Getter) -> object:
        result: bool | None = True
        for fn in frozen:
            value = fn(get)
            if value is False:
                return False
            if value is not True:
                result = None
        return result

    return and_n


def _or(operands: list[Eval]) -> Eval:
    if len(operands) == 2:
        first, second = operands

        def or2(get: Getter) -> object:
            a = first(get)
            if a is True:
                return True
            b = second(get)
            if b is True:
                return True
            return False if a is False and b is False else None

        return or2
    frozen = tuple(operands)

    def or_n(get: Getter) -> object:
        result: bool | None = False
        for fn in frozen:
            value = fn(get)
            if value is True:
                return True
            if value is not False:
                result = None
        return result

    return or_n


def _between(operand: Eval, low: Eval, high: Eval, negated: bool) -> Eval:
    if negated:

        def not_between(get: Getter) -> object:
            # Spec: "a NOT BETWEEN x AND y" is "a < x OR a > y".
            value = operand(get)
            below = _compare("<", value, low(get))
            if below is True:
                return True
            above = _compare(">", value, high(get))
            if above is True:
                return True
            return False if below is False and above is False else None

        return not_between

    def between(get: Getter) -> object:
        # Spec: "a BETWEEN x AND y" is "a >= x AND a <= y".
        value = operand(get)
        lower_ok = _compare(">=", value, low(get))
        if lower_ok is False:
            return False
        upper_ok = _compare("<=", value, high(get))
        if upper_ok is False:
            return False
        return True if lower_ok is True and upper_ok is True else None

    return between


def _in(operand: Eval, values: frozenset[str], negated: bool) -> Eval:
    def in_(get: Getter) -> object:
        value = operand(get)
        if value is None:
            return None
        if isinstance(value, str):
            return (value in values) is not negated
        return False

    return in_


def _like(operand: Eval, matcher: Callable[[str], bool], negated: bool) -> Eval:
    def like(get: Getter) -> object:
        value = operand(get)
        if value is None:
            return None
        if isinstance(value, str):
            return bool(matcher(value)) is not negated
        return False

    return like


def _is_null(operand: Eval, negated: bool) -> Eval:
    def is_null(get: Getter) -> object:
        return (operand(get) is None) is not negated

    return is_null
