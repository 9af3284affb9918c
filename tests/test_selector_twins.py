"""Differential tests: the compiled and the pure selector-evaluation twins must agree.

Random selectors are generated from the grammar (every predicate form, arithmetic, NOT /
AND / OR, constants that fold, identifiers that are always NULL) and evaluated by both
``jmspy._cext.selector_eval`` and ``jmspy._pure.selector_eval`` against random messages
whose values cover every type the rules distinguish: NULL, bool, exact and huge ints,
ints at the C ``long long`` and 2**53 boundaries, NaN / infinities / -0.0, strs with
LIKE metacharacters and non-ASCII code points, int / float / str subclasses, and values
of unsupported types. The getter records every lookup and can raise: the twins must give
the same three-valued result (or the same exception) after the same lookups in the same
order. Both twins are imported directly, so this runs whatever JMSPY_PUREPYTHON says.
"""

from __future__ import annotations

import enum
import math
from decimal import Decimal
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

import jmspy._cext.selector_eval as cext
import jmspy._pure.selector_eval as pure
from jmspy.errors import InvalidSelectorException
from jmspy.selector.evaluate import SelectorEvalModule
from jmspy.selector.nodes import Arith, Ident
from jmspy.selector.parser import parse

_c_check: SelectorEvalModule = cext
_p_check: SelectorEvalModule = pure

SETTINGS = settings(
    max_examples=400,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

#: Identifiers the selectors use; "boom" makes the getter raise, JMSDestination is never
#: looked up (always NULL), JMSDeliveryMode is normalised.
NAMES = ("a", "b", "s", "t", "boom", "JMSPriority", "JMSDeliveryMode", "JMSDestination")


class Color(enum.IntEnum):
    RED = 1
    BLUE = 2


class Str(str):
    """A plain str subclass: compares and matches by its characters."""


class Num(float):
    """A float subclass."""


class GetterError(Exception):
    """Raised by the recording getter for "boom"."""


LIKE_ALPHABET = "ab_%\\é"

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-20, 20),
    st.integers(-20, 20),
    st.sampled_from(
        [2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, 2**63, -(2**63), 10**30, -(10**400)]
    ),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.5, 2.5, 1e308, float(2**53)]),
    st.text(LIKE_ALPHABET, max_size=6),
    st.sampled_from(["red", "UK", "PERSISTENT", "NON_PERSISTENT", ""]),
    st.sampled_from(
        [Color.RED, Color.BLUE, Str("a_b"), Str("ab"), Num(2.5), Decimal(1), b"a", (1,)]
    ),
)

messages = st.dictionaries(st.sampled_from(NAMES), values, max_size=len(NAMES))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


ident = st.sampled_from(NAMES)
int_literal = st.sampled_from(
    [
        "0",
        "1",
        "2",
        "7",
        "10",
        "9007199254740993",
        "9223372036854775807",
        "9223372036854775808",
        "100000000000000000000",
    ]
)
float_literal = st.sampled_from(["0.0", "2.5", ".5", "7.", "1e308", "1.5E-3", "9007199254740992.0"])
str_literal = st.one_of(
    st.text(LIKE_ALPHABET + "'", max_size=4), st.sampled_from(["red", "UK", "PERSISTENT"])
).map(_quote)

num_expr: st.SearchStrategy[str] = st.deferred(
    lambda: st.one_of(
        ident,
        int_literal,
        float_literal,
        st.tuples(st.sampled_from(["-", "+"]), num_expr).map(lambda t: f"{t[0]}{t[1]}"),
        st.tuples(num_expr, st.sampled_from(["+", "-", "*", "/"]), num_expr).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
    )
)
str_expr = st.one_of(ident, str_literal)


@st.composite
def like_pattern(draw: st.DrawFn) -> str:
    escape = draw(st.sampled_from([None, "\\", "a", "!"]))
    out: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        piece = draw(st.sampled_from(["a", "b", "é", "_", "%", "\\", "!", "literal"]))
        if piece == "literal" and escape is not None:
            out.append(escape + draw(st.sampled_from(["_", "%", escape])))
        elif piece == escape:
            out.append(escape + escape)
        elif piece != "literal":
            out.append(piece)
    text = _quote("".join(out))
    return text if escape is None else f"{text} ESCAPE {_quote(escape)}"


def _not(word: str, negated: bool) -> str:
    return f"NOT {word}" if negated else word


predicate = st.one_of(
    ident,
    st.sampled_from(["TRUE", "FALSE"]),
    st.tuples(num_expr, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), num_expr).map(" ".join),
    st.tuples(str_expr, st.sampled_from(["=", "<>"]), str_expr).map(" ".join),
    st.tuples(ident, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), ident).map(" ".join),
    st.tuples(ident, st.booleans(), like_pattern()).map(
        lambda t: f"{t[0]} {_not('LIKE', t[1])} {t[2]}"
    ),
    st.tuples(ident, st.booleans(), st.lists(str_literal, min_size=1, max_size=3)).map(
        lambda t: f"{t[0]} {_not('IN', t[1])} ({', '.join(t[2])})"
    ),
    st.tuples(num_expr, st.booleans(), num_expr, num_expr).map(
        lambda t: f"{t[0]} {_not('BETWEEN', t[1])} {t[2]} AND {t[3]}"
    ),
    st.tuples(ident, st.booleans()).map(lambda t: f"{t[0]} IS {'NOT ' if t[1] else ''}NULL"),
)

bool_expr: st.SearchStrategy[str] = st.deferred(
    lambda: st.one_of(
        predicate,
        predicate,
        bool_expr.map(lambda e: f"NOT ({e})"),
        st.tuples(st.sampled_from(["AND", "OR"]), st.lists(bool_expr, min_size=2, max_size=4)).map(
            lambda t: "(" + f" {t[0]} ".join(t[1]) + ")"
        ),
        st.tuples(bool_expr, st.sampled_from(["=", "<>"]), bool_expr).map(
            lambda t: f"({t[0]}) {t[1]} ({t[2]})"
        ),
    )
)


def run(twin: Any, text: str, message: dict[str, object]) -> tuple[object, list[str]]:
    """Compile ``text`` with ``twin`` and evaluate it; the outcome and the lookups made."""
    calls: list[str] = []

    def get(name: str) -> object:
        calls.append(name)
        if name == "boom" and message.get("boom") is not None:
            raise GetterError(f"cannot read {name}")
        return message.get(name)

    predicate = twin.compile_predicate(parse(text))
    try:
        outcome: object = ("value", predicate.evaluate(get))
    except GetterError as exc:
        return ("error", type(exc), str(exc)), calls
    matched = predicate.matches(get)
    assert matched is (outcome[1] is True)  # type: ignore[index]
    return outcome, calls


@SETTINGS
@given(text=bool_expr, message=messages)
def test_twins_agree_on_random_selectors_and_messages(
    text: str, message: dict[str, object]
) -> None:
    try:
        parse(text)
    except InvalidSelectorException:
        return  # the parser is shared; only evaluation is twinned
    c_out, c_calls = run(cext, text, message)
    p_out, p_calls = run(pure, text, message)
    assert c_out == p_out, text
    assert c_calls == p_calls, text


@SETTINGS
@given(pattern=like_pattern(), value=st.text(LIKE_ALPHABET, max_size=10))
def test_twins_agree_on_like_patterns(pattern: str, value: str) -> None:
    text = f"s LIKE {pattern}"
    try:
        parse(text)
    except InvalidSelectorException:
        return
    for v in (value, Str(value)):
        assert run(cext, text, {"s": v}) == run(pure, text, {"s": v}), (text, v)


@SETTINGS
@given(a=values, b=values, c=values, op=st.sampled_from(["+", "-", "*", "/"]))
def test_twins_agree_on_arithmetic_results(a: object, b: object, c: object, op: str) -> None:
    # Probe the result from every side: against a random value, and against the pure
    # twin's own result (so the compiled result must equal it, not just sort alike).
    exact = pure._compile(Arith(op, Ident("a", 0), Ident("b", 0), 0)).fn({"a": a, "b": b}.get)
    for t in (c, exact):
        message = {"a": a, "b": b, "t": t}
        for cmp in ("=", "<>", "<", "<=", ">", ">="):
            text = f"a {op} b {cmp} t"
            assert run(cext, text, message) == run(pure, text, message), (text, message)


@SETTINGS
@given(a=values, b=values, alias=st.booleans(), op=st.sampled_from(["=", "<>", "<", ">="]))
def test_twins_agree_when_both_sides_are_one_object(
    a: object, b: object, alias: bool, op: str
) -> None:
    # One NaN object on both sides must still be unequal to itself.
    message = {"a": a, "b": a if alias else b}
    for text in (f"a {op} b", f"a {op} a", "a BETWEEN b AND a", f"a + 0 {op} a"):
        assert run(cext, text, message) == run(pure, text, message), (text, message)


# -- the cases the compiled twin's C fast paths must get exactly right -------------------------

EDGE_CASES = [
    # NaN is unequal to itself even as one object (no identity shortcut).
    ("a = b", {"a": math.nan, "b": math.nan}, False),
    ("a <> b", {"a": math.nan, "b": math.nan}, True),
    ("a = 1.5", {"a": math.nan}, False),
    ("a <> 1.5", {"a": math.nan}, True),
    # Above 2**53 a float cannot hold every int: compare exactly, as Python does.
    ("a = 9007199254740993", {"a": float(2**53)}, False),
    ("a < 9007199254740993", {"a": float(2**53)}, True),
    ("a = 9007199254740992", {"a": float(2**53)}, True),
    ("a > 9223372036854775807", {"a": 2**63}, True),
    ("a = -9223372036854775808", {"a": -(2**63)}, True),
    # Truncating division at the C long long edge, and beyond it.
    ("a / -1 = 9223372036854775808", {"a": -(2**63)}, True),
    ("a / 2 = -3", {"a": -7}, True),
    ("a / b = 0", {"a": 1, "b": -(10**30)}, True),
    ("a / 0.0 = 1", {"a": 1.0}, None),
    ("a / b > 0", {"a": 10**400, "b": 2.0}, None),  # OverflowError -> UNKNOWN
    ("a + 1.5 > 0", {"a": 10**400}, None),
    ("-a = 0", {"a": -0.0}, True),
    ("a * 10 > 1e308", {"a": 1e308}, True),  # inf, no error
    # Subclasses are numbers / strings; bool never is a number.
    ("a = 1", {"a": Color.RED}, True),
    ("a + a = 2", {"a": Color.RED}, True),
    ("a = 2.5", {"a": Num(2.5)}, True),
    ("a LIKE 'a\\_b' ESCAPE '\\'", {"a": Str("a_b")}, True),
    ("a = 'ab'", {"a": Str("ab")}, True),
    ("a = 1", {"a": True}, False),
    ("a = 1", {"a": Decimal(1)}, False),
    # LIKE on non-BMP code points and the segment search.
    ("a LIKE '_%_b%a'", {"a": "\U0001f600xbya"}, True),
    ("a LIKE '%ab_%b_a%'", {"a": "xxabzzbyaa"}, True),
    ("a LIKE '%ab_%b_a%'", {"a": "xxabzba"}, False),
    ("a LIKE 'a_c'", {"a": "a\nc"}, True),
]


@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
@pytest.mark.parametrize(("text", "message", "expected"), EDGE_CASES)
def test_fast_path_edge_cases(
    twin: Any, text: str, message: dict[str, object], expected: bool | None
) -> None:
    assert twin.compile_predicate(parse(text)).evaluate(message.get) is expected


@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
def test_str_subclass_equality_override_is_honoured_by_both(twin: Any) -> None:
    class Loose(str):
        def __eq__(self, other: object) -> bool:
            return isinstance(other, str) and self.lower() == other.lower()

        __hash__ = str.__hash__

    predicate = twin.compile_predicate(parse("a = 'RED' AND a LIKE 'RED'"))
    assert predicate.evaluate({"a": Loose("red")}.get) is True


@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
def test_empty_selector_matches_without_lookups(twin: Any) -> None:
    def get(name: str) -> object:
        raise AssertionError(name)

    assert twin.compile_predicate(None).matches(get) is True
