"""Selector predicates: BETWEEN, IN, LIKE (wildcards, escapes, no regex, no backtracking)
and IS NULL (JMS 2.0 section 3.8.1.1)."""

from __future__ import annotations

import pytest
from selector_helpers import matches, truth

from jmspy.selector import compile_selector

# -- BETWEEN ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (14, False), (14.99, False), (15, True), (15.0, True),
        (17, True), (19, True), (19.01, False), (20, False),
    ],
)  # fmt: skip
def test_between_includes_both_boundaries(age: float, expected: bool) -> None:
    assert truth("age BETWEEN 15 AND 19", age=age) is expected
    assert truth("age NOT BETWEEN 15 AND 19", age=age) is (not expected)


def test_between_with_missing_identifier_is_unknown() -> None:
    assert truth("age BETWEEN 15 AND 19") is None
    assert truth("age NOT BETWEEN 15 AND 19") is None


def test_between_with_missing_bound_follows_its_and_or_expansion() -> None:
    # a BETWEEN lo AND 19 == a >= lo AND a <= 19: FALSE once a <= 19 is FALSE.
    assert truth("age BETWEEN lo AND 19", age=25) is False
    assert truth("age BETWEEN lo AND 19", age=17) is None
    # a NOT BETWEEN lo AND 19 == a < lo OR a > 19: TRUE once a > 19 is TRUE.
    assert truth("age NOT BETWEEN lo AND 19", age=25) is True
    assert truth("age NOT BETWEEN lo AND 19", age=17) is None


def test_between_accepts_expressions_and_identifier_bounds() -> None:
    assert matches("x BETWEEN lo + 1 AND hi * 2", x=6, lo=4, hi=3)
    assert not matches("x BETWEEN lo + 1 AND hi * 2", x=7, lo=4, hi=3)


def test_between_and_not_between_are_both_false_for_a_string_value() -> None:
    # Per the spec's expansions, unlike-type comparisons are FALSE in both forms.
    assert truth("age BETWEEN 1 AND 2", age="1") is False
    assert truth("age NOT BETWEEN 1 AND 2", age="1") is False


def test_between_binds_its_and_before_logical_and() -> None:
    assert matches("x BETWEEN 1 AND 3 AND y = 1", x=2, y=1)
    assert not matches("x BETWEEN 1 AND 3 AND y = 1", x=2, y=0)


# -- IN --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("country", "expected"), [("UK", True), ("US", True), ("Peru", False)])
def test_in_and_not_in_membership(country: str, expected: bool) -> None:
    assert truth("Country IN ('UK', 'US', 'France')", Country=country) is expected
    assert truth("Country NOT IN ('UK', 'US', 'France')", Country=country) is (not expected)


def test_in_with_missing_identifier_is_unknown() -> None:
    assert truth("Country IN ('UK')") is None
    assert truth("Country NOT IN ('UK')") is None


def test_in_is_case_sensitive_and_handles_quotes_and_single_items() -> None:
    assert not matches("c IN ('uk')", c="UK")
    assert matches("c IN ('it''s', 'x')", c="it's")
    assert matches("c IN ('a','a')", c="a")


def test_in_and_not_in_are_false_for_a_non_string_value() -> None:
    assert truth("c IN ('1')", c=1) is False
    assert truth("c NOT IN ('1')", c=1) is False


# -- LIKE ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("12%3", "123", True),
        ("12%3", "12993", True),
        ("12%3", "1234", False),
        ("l_se", "lose", True),
        ("l_se", "loose", False),
        ("%", "", True),
        ("_", "", False),
        ("_", "ab", False),
        ("a%", "a", True),
        ("%a", "ba", True),
        ("%a%", "xyz", False),
        ("%a%", "cat", True),
        ("a_c%e", "abcde", True),
        ("a_c%e", "abcd", False),
        ("%b_d%", "abxdbcd", True),
        ("%%%", "x", True),
        ("a%b%c", "abc", True),
        ("a%b%c", "acb", False),
        ("ab%ba", "aba", False),
        ("ab%ba", "abba", True),
        ("", "", True),
        ("", "a", False),
        ("_%_", "ab", True),
        ("_%_", "a", False),
        ("a%", "a\nb", True),
        ("a_b", "a\nb", True),
    ],
)
def test_like_wildcards(pattern: str, value: str, expected: bool) -> None:
    assert truth(f"s LIKE '{pattern}'", s=value) is expected
    assert truth(f"s NOT LIKE '{pattern}'", s=value) is (not expected)


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("a.b%", "a.bc", True),
        ("a.b%", "axbc", False),
        ("a.b", "axb", False),
        ("(a)", "(a)", True),
        ("(a)", "a", False),
        ("[ab]", "a", False),
        ("[ab]", "[ab]", True),
        ("a*", "aaa", False),
        ("a*", "a*", True),
        ("a+?", "a+?", True),
        ("^a$", "^a$", True),
        ("^a$", "a", False),
        ("a|b", "a", False),
        ("\\d%", "\\d1", True),
        ("\\d%", "1", False),
        ("{1}%", "{1}x", True),
        ("%.%", "abc", False),
        ("%.%", "a.c", True),
    ],
)
def test_like_treats_regex_special_characters_literally(
    pattern: str, value: str, expected: bool
) -> None:
    assert truth(f"s LIKE '{pattern}'", s=value) is expected


def test_like_pattern_with_doubled_quote() -> None:
    assert matches("s LIKE 'it''s%'", s="it's here")


@pytest.mark.parametrize(
    ("selector", "value", "expected"),
    [
        (r"s LIKE '\_%' ESCAPE '\'", "_foo", True),
        (r"s LIKE '\_%' ESCAPE '\'", "xfoo", False),
        (r"s LIKE '100\%' ESCAPE '\'", "100%", True),
        (r"s LIKE '100\%' ESCAPE '\'", "1000", False),
        (r"s LIKE 'a\\b' ESCAPE '\'", "a\\b", True),
        ("s LIKE 'a!_b%' ESCAPE '!'", "a_bc", True),
        ("s LIKE 'a!_b%' ESCAPE '!'", "axbc", False),
        ("s LIKE 'a!!%' ESCAPE '!'", "a!x", True),
        ("s LIKE '%.%%' ESCAPE '.'", "50%", True),
        ("s LIKE '%.%%' ESCAPE '.'", "50", False),
        ("s LIKE 'x''_' ESCAPE ''''", "x_", True),
        ("s LIKE 'x''_' ESCAPE ''''", "xy", False),
        ("s LIKE '%__' ESCAPE '_'", "x_", True),
    ],
)
def test_like_escape_makes_wildcards_literal(selector: str, value: str, expected: bool) -> None:
    assert truth(selector, s=value) is expected


def test_like_without_escape_clause_treats_backslash_literally() -> None:
    assert matches(r"s LIKE 'a\_'", s="a\\x")
    assert not matches(r"s LIKE 'a\_'", s="a_")


def test_like_with_missing_identifier_is_unknown() -> None:
    assert truth("s LIKE 'a%'") is None
    assert truth("s NOT LIKE 'a%'") is None


def test_like_and_not_like_are_false_for_a_non_string_value() -> None:
    assert truth("s LIKE '1%'", s=12) is False
    assert truth("s NOT LIKE '1%'", s=12) is False


def test_like_with_many_wildcards_does_not_backtrack_exponentially() -> None:
    # A naive '.*' regex takes astronomically long here; ours is O(n * m).
    sel = compile_selector("s LIKE '%a%a%a%a%a%a%a%a%a%a%a%a%c%'")
    assert not sel.matches({"s": "a" * 3000 + "b"}.get)
    assert sel.matches({"s": "a" * 3000 + "c"}.get)


# -- IS NULL ---------------------------------------------------------------------------------


def test_is_null_and_is_not_null_are_never_unknown() -> None:
    assert truth("x IS NULL") is True
    assert truth("x IS NULL", x=0) is False
    assert truth("x IS NOT NULL") is False
    assert truth("x IS NOT NULL", x="") is True


def test_empty_string_and_false_are_not_null() -> None:
    assert not matches("x IS NULL", x="")
    assert not matches("x IS NULL", x=False)
