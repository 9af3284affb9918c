"""Values at the edges of the selector value rules (jmspy.selector.evaluate): NaN, ints
beyond a float's 2**53 and a C long long, truncating division at those edges, overflow,
-0.0, int / float / str subclasses, bools and Decimals (never numbers), LIKE on non-BMP
code points and newlines. These were the cases the retired compiled evaluator's C fast
paths had to get exactly right; the evaluator must still get them right."""

from __future__ import annotations

import enum
import math
from decimal import Decimal

import pytest

from jmspy.selector.evaluate import compile_predicate
from jmspy.selector.parser import parse


class Color(enum.IntEnum):
    RED = 1
    BLUE = 2


class Str(str):
    """A plain str subclass: compares and matches by its characters."""


class Num(float):
    """A float subclass."""


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


@pytest.mark.parametrize(("text", "message", "expected"), EDGE_CASES)
def test_values_at_the_edges_of_the_number_and_string_rules(
    text: str, message: dict[str, object], expected: bool | None
) -> None:
    assert compile_predicate(parse(text)).evaluate(message.get) is expected


def test_a_str_subclass_equality_override_is_honoured() -> None:
    class Loose(str):
        def __eq__(self, other: object) -> bool:
            return isinstance(other, str) and self.lower() == other.lower()

        __hash__ = str.__hash__

    predicate = compile_predicate(parse("a = 'RED' AND a LIKE 'RED'"))
    assert predicate.evaluate({"a": Loose("red")}.get) is True


def test_empty_selector_matches_without_lookups() -> None:
    def get(name: str) -> object:
        raise AssertionError(name)

    assert compile_predicate(None).matches(get) is True
