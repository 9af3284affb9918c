"""Property tests: the compiled selectors agree with small reference evaluators."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jmspy.errors import InvalidSelectorException
from jmspy.selector import compile_selector

Tree = tuple[Any, ...]  # ("leaf", text) | ("not", Tree) | ("and"/"or", list[Tree])
Truth = bool | None


def truth(expr: str, props: dict[str, object]) -> Truth:
    if compile_selector(expr).matches(props.get):
        return True
    if compile_selector(f"NOT ({expr})").matches(props.get):
        return False
    return None


# -- reference three-valued logic ------------------------------------------------------------


def ref_not(a: Truth) -> Truth:
    return None if a is None else not a


def _ref_kleene(dominant: bool, a: Truth, b: Truth) -> Truth:
    """Three-valued AND (``dominant`` False) or OR (``dominant`` True): the dominant value
    if either side has it, else UNKNOWN if either side is UNKNOWN, else the other value."""
    if a is dominant or b is dominant:
        return dominant
    if a is None or b is None:
        return None
    return not dominant


def ref_and(a: Truth, b: Truth) -> Truth:
    return _ref_kleene(False, a, b)


def ref_or(a: Truth, b: Truth) -> Truth:
    return _ref_kleene(True, a, b)


# Leaves: boolean identifiers plus literals and an always-UNKNOWN comparison.
LEAF_VALUES: dict[str, Callable[[dict[str, Truth]], Truth]] = {
    "a": lambda env: env["a"],
    "b": lambda env: env["b"],
    "c": lambda env: env["c"],
    "d": lambda env: env["d"],
    "TRUE": lambda env: True,
    "FALSE": lambda env: False,
    "missing = 1": lambda env: None,
}

trees: st.SearchStrategy[Tree] = st.recursive(
    st.sampled_from(sorted(LEAF_VALUES)).map(lambda leaf: ("leaf", leaf)),
    lambda kids: st.one_of(
        kids.map(lambda t: ("not", t)),
        st.tuples(st.sampled_from(["and", "or"]), st.lists(kids, min_size=2, max_size=3)),
    ),
    max_leaves=16,
)


def ref_eval(tree: Tree, env: dict[str, Truth]) -> Truth:
    tag = tree[0]
    if tag == "leaf":
        return LEAF_VALUES[tree[1]](env)
    if tag == "not":
        return ref_not(ref_eval(tree[1], env))
    values = [ref_eval(child, env) for child in tree[1]]
    return functools.reduce(ref_and if tag == "and" else ref_or, values)


_LEVEL = {"or": 1, "and": 2, "not": 3, "leaf": 4}


def render(tree: Tree, minimal: bool, lower: bool) -> str:
    """Render with full parentheses, or only where NOT > AND > OR precedence needs them."""

    def kw(word: str) -> str:
        return word.lower() if lower else word

    def wrap(child: Tree, min_level: int) -> str:
        text = render(child, minimal, lower)
        if not minimal or _LEVEL[child[0]] < min_level:
            return f"({text})"
        return text

    tag = tree[0]
    if tag == "leaf":
        return str(tree[1])
    if tag == "not":
        return f"{kw('NOT')} {wrap(tree[1], 3)}"
    level = _LEVEL[tag]
    return f" {kw(tag.upper())} ".join(wrap(child, level) for child in tree[1])


@settings(max_examples=400, deadline=None)
@given(
    tree=trees,
    env=st.fixed_dictionaries({name: st.sampled_from([True, False, None]) for name in "abcd"}),
    lower=st.booleans(),
)
def test_random_and_or_not_trees_match_reference_three_valued_evaluator(
    tree: Tree, env: dict[str, Truth], lower: bool
) -> None:
    expected = ref_eval(tree, env)
    props: dict[str, object] = dict(env)
    for minimal in (False, True):
        text = render(tree, minimal, lower)
        assert truth(text, props) is expected, text


# -- comparisons and arithmetic ----------------------------------------------------------------

scalar_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-4, 4),
    st.floats(-4, 4, allow_nan=False).map(lambda f: round(f * 2) / 2),
    st.sampled_from(["", "a", "b", "1"]),
)

_PY_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def ref_compare(op: str, a: object, b: object) -> Truth:
    """JMS comparison: NULL -> UNKNOWN, unlike types -> FALSE, str/bool only = and <>."""
    if a is None or b is None:
        return None

    def kind(v: object) -> str:
        if isinstance(v, bool):
            return "bool"
        return "num" if isinstance(v, int | float) else "str"

    if kind(a) != kind(b):
        return False
    if kind(a) != "num" and op not in ("=", "<>"):
        return False
    return _PY_OPS[op](a, b)


@settings(max_examples=400, deadline=None)
@given(op=st.sampled_from(sorted(_PY_OPS)), x=scalar_values, y=scalar_values)
def test_comparison_of_random_values_matches_reference(op: str, x: object, y: object) -> None:
    assert truth(f"x {op} y", {"x": x, "y": y}) is ref_compare(op, x, y)


def ref_arith(op: str, a: object, b: object) -> object:
    """JMS arithmetic: numbers only, division by zero UNKNOWN, long division truncates."""
    numeric = [isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b)]
    if not all(numeric):
        return None
    assert isinstance(a, int | float) and isinstance(b, int | float)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        return int(a / b)  # small operands: exact, and int() truncates toward zero
    return a / b


@settings(max_examples=400, deadline=None)
@given(op=st.sampled_from(["+", "-", "*", "/"]), x=scalar_values, y=scalar_values)
def test_arithmetic_on_random_values_matches_reference(op: str, x: object, y: object) -> None:
    expected = ref_arith(op, x, y)
    result = truth(f"x {op} y = r", {"x": x, "y": y, "r": expected})
    assert result is (None if expected is None else True)


@settings(max_examples=300, deadline=None)
@given(op=st.sampled_from(["+", "-", "*", "/"]), x=st.integers(-50, 50), y=st.integers(-50, 50))
def test_integer_arithmetic_matches_java_long_semantics(op: str, x: int, y: int) -> None:
    expected = ref_arith(op, x, y)
    result = truth(f"x {op} y = r", {"x": x, "y": y, "r": expected})
    assert result is (None if expected is None else True)


# -- LIKE --------------------------------------------------------------------------------------

# Pattern pieces as written (with '!' as the escape) -> what the reference sees.
LIKE_PIECES = {
    "a": "a",
    "b": "b",
    ".": ".",
    "*": "*",
    "(": "(",
    "\\": "\\",
    "''": "'",
    "\n": "\n",
    "%": "%",
    "_": "_",
    "!%": "\0%",
    "!_": "\0_",
    "!!": "\0!",
}


def ref_like(pieces: list[str], value: str) -> bool:
    """Textbook recursive LIKE; pieces starting with NUL are escaped literals."""

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(pieces):
            return j == len(value)
        piece = pieces[i]
        if piece == "%":
            return match(i + 1, j) or (j < len(value) and match(i, j + 1))
        if j == len(value):
            return False
        if piece == "_" or piece[-1] == value[j]:
            return match(i + 1, j + 1)
        return False

    return match(0, 0)


@settings(max_examples=500, deadline=None)
@given(
    pattern=st.lists(st.sampled_from(sorted(LIKE_PIECES)), max_size=8),
    value=st.text(alphabet="ab.*(\\'\n%_!", max_size=8),
)
def test_like_matches_reference_matcher(pattern: list[str], value: str) -> None:
    selector = f"s LIKE '{''.join(pattern)}' ESCAPE '!'"
    expected = ref_like([LIKE_PIECES[p] for p in pattern], value)
    assert compile_selector(selector).matches({"s": value}.get) is expected


# -- robustness --------------------------------------------------------------------------------

SELECTOR_TOKENS = [
    "a", "b", "JMSType", "JMSRedelivered", "1", "2.5", "0", "'x'", "'%'", "TRUE", "null",
    "AND", "OR", "NOT", "BETWEEN", "IN", "LIKE", "IS", "NULL", "ESCAPE",
    "=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "(", ")", ",", "'", "#", "1e", ".",
]  # fmt: skip

selector_texts = st.one_of(
    st.lists(st.sampled_from(SELECTOR_TOKENS), max_size=12).map(" ".join),
    st.text(max_size=30),
)
any_values = st.one_of(
    scalar_values,
    st.floats(),
    st.integers(),
    st.text(max_size=3),
    st.just(10**400),
    st.just(b"x"),
)


@settings(max_examples=1000, deadline=None)
@given(text=selector_texts, data=st.data())
def test_any_text_compiles_or_raises_invalid_selector_and_evaluates_to_bool(
    text: str, data: st.DataObject
) -> None:
    try:
        sel = compile_selector(text)
    except InvalidSelectorException as exc:
        assert 0 <= exc.position <= len(text)
        assert exc.selector == text
        return
    props = {name: data.draw(any_values) for name in sorted(sel.identifiers)}
    assert sel.matches(props.get) in (True, False)
