"""Selector comparison and arithmetic: type promotion, unlike types, NULL, division
and overflow (JMS 2.0 section 3.8.1.1)."""

from __future__ import annotations

import enum
from decimal import Decimal

import pytest
from selector_helpers import matches, truth

# -- comparison ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "x", "expected"),
    [
        ("=", 5, True),
        ("=", 6, False),
        ("<>", 6, True),
        ("<>", 5, False),
        (">", 6, True),
        (">", 5, False),
        (">=", 5, True),
        (">=", 4, False),
        ("<", 4, True),
        ("<", 5, False),
        ("<=", 5, True),
        ("<=", 6, False),
    ],
)
def test_numeric_comparison_operators(op: str, x: int, expected: bool) -> None:
    assert truth(f"x {op} 5", x=x) is expected
    assert truth(f"x {op} y", x=x, y=5) is expected
    # A literal on the left is mirrored, not mis-ordered.
    assert truth(f"{x} {op} y", y=5) is expected


@pytest.mark.parametrize("op", ["=", "<>", ">", ">=", "<", "<="])
def test_comparison_with_missing_identifier_is_unknown(op: str) -> None:
    assert truth(f"x {op} 5") is None
    assert truth(f"5 {op} x") is None
    assert truth(f"x {op} y", x=1) is None


def test_int_and_float_compare_by_numeric_promotion() -> None:
    assert matches("x = 1", x=1.0)
    assert matches("x = 1.0", x=1)
    assert matches("x < 1.5", x=1)
    assert matches("x > 1", x=1.25)
    assert matches("x = y", x=3, y=3.0)


def test_string_equality_and_inequality() -> None:
    assert truth("s = 'EU'", s="EU") is True
    assert truth("s = 'EU'", s="eu") is False
    assert truth("s <> 'EU'", s="US") is True
    assert truth("s <> 'EU'", s="EU") is False
    assert truth("s = t", s="a", t="a") is True


def test_string_ordering_between_identifiers_is_false() -> None:
    assert truth("s < t", s="a", t="b") is False
    assert truth("s >= t", s="b", t="a") is False


def test_boolean_equality_and_inequality() -> None:
    assert truth("flag = TRUE", flag=True) is True
    assert truth("flag = TRUE", flag=False) is False
    assert truth("flag <> FALSE", flag=True) is True
    assert truth("(x > 1) = TRUE", x=2) is True
    assert truth("(x > 1) = FALSE", x=2) is False


def test_boolean_ordering_between_identifiers_is_false() -> None:
    assert truth("a > b", a=True, b=False) is False


def test_bool_is_not_a_number() -> None:
    assert truth("x = 1", x=True) is False
    assert truth("x = 0", x=False) is False
    assert truth("x > 0", x=True) is False
    assert truth("flag = TRUE", flag=1) is False
    assert truth("x + 1 = 2", x=True) is None


@pytest.mark.parametrize(
    ("expr", "props"),
    [
        ("s = 1", {"s": "1"}),
        ("s <> 1", {"s": "1"}),
        ("n = '1'", {"n": 1}),
        ("n <> '1'", {"n": 1}),
        ("s > 1", {"s": "2"}),
        ("flag = 'true'", {"flag": True}),
        ("'1' = 1", {}),
        ("TRUE = 1", {}),
    ],
)
def test_comparing_unlike_types_is_false_not_unknown(expr: str, props: dict[str, object]) -> None:
    assert truth(expr, **props) is False


def test_values_of_unsupported_types_never_compare() -> None:
    assert truth("d = 1", d=Decimal(1)) is False
    assert truth("d = e", d=b"x", e=b"x") is False
    assert truth("d + 1 = 2", d=Decimal(1)) is None


def test_numeric_subclasses_count_as_numbers() -> None:
    class Level(enum.IntEnum):
        HIGH = 9

    assert matches("level = 9", level=Level.HIGH)


def test_nan_is_unequal_to_everything() -> None:
    nan = float("nan")
    assert truth("x = y", x=nan, y=nan) is False
    assert truth("x <> 1", x=nan) is True


# -- arithmetic ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        "x + 2 = 7",
        "x - 2 = 3",
        "x * 2 = 10",
        "x / 5 = 1",
        "-x = -5",
        "+x = 5",
        "- -x = 5",
        "-(x - 10) = 5",
        "2 + x * 3 = 17",
        "(2 + x) * 3 = 21",
        "20 - x - 5 = 10",
        "100 / x / 2 = 10",
        "x * 1.5 = 7.5",
        "-x * -2 = 10",
    ],
)
def test_arithmetic_operators_precedence_and_left_associativity(expr: str) -> None:
    assert truth(expr, x=5) is True


def test_exact_division_truncates_toward_zero_like_java_long() -> None:
    assert matches("x / 2 = 3", x=7)
    assert matches("x / 2 = -3", x=-7)
    assert matches("x / -2 = -3", x=7)
    assert matches("x / 2.0 = 3.5", x=7)
    assert matches("x / 2 = 3.5", x=7.0)


@pytest.mark.parametrize("expr", ["x / 0 = 1", "x / z > 0", "x / 0.0 = 1", "1 / 0 = 1"])
def test_division_by_zero_is_unknown(expr: str) -> None:
    assert truth(expr, x=1.5, z=0) is None


def test_division_by_zero_inside_or_does_not_hide_a_true_operand() -> None:
    assert matches("x / 0 = 1 OR y = 1", x=1, y=1)


@pytest.mark.parametrize("expr", ["x + 1 = 2", "1 + x = 2", "-x = -1", "x * 2 > 0"])
def test_arithmetic_with_missing_identifier_is_unknown(expr: str) -> None:
    assert truth(expr) is None


def test_arithmetic_on_a_string_value_is_unknown() -> None:
    assert truth("s + 1 = 2", s="1") is None
    assert truth("-s = -1", s="1") is None


def test_arithmetic_overflow_to_float_is_unknown() -> None:
    assert truth("x * 1.5 > 0", x=10**400) is None


def test_constant_expressions_are_folded_but_still_correct() -> None:
    assert matches("1 + 2 * 3 = 7")
    assert not matches("1 + 2 * 3 = 9")
    assert truth("1 / 0 = 1") is None
