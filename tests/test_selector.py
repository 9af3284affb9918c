"""Semantics of JMS message selectors (JMS 2.0 section 3.8.1.1).

``truth()`` tells TRUE, FALSE and UNKNOWN apart: an expression is FALSE when its
negation matches, UNKNOWN when neither it nor its negation matches.
"""

from __future__ import annotations

import enum
import itertools
from decimal import Decimal

import pytest

from jmspy.errors import InvalidSelectorException
from jmspy.selector import Selector, compile_selector


def matches(selector: str | None, **props: object) -> bool:
    return compile_selector(selector).matches(props.get)


def truth(expr: str, **props: object) -> bool | None:
    if matches(expr, **props):
        return True
    if matches(f"NOT ({expr})", **props):
        return False
    return None


# -- empty selectors, API ----------------------------------------------------------------


@pytest.mark.parametrize("text", [None, "", "   ", " \t\r\n\f "])
def test_empty_or_whitespace_selector_matches_everything(text: str | None) -> None:
    sel = compile_selector(text)
    assert sel.matches(lambda name: None)
    assert sel.identifiers == frozenset()
    assert sel.text == ("" if text is None else text)


def test_compile_selector_caches_by_text() -> None:
    assert compile_selector("a = 1") is compile_selector("a = 1")


def test_selector_exposes_text_and_referenced_identifiers() -> None:
    sel = compile_selector("region = 'EU' AND (qty > 10 OR JMSPriority BETWEEN lo AND hi)")
    assert isinstance(sel, Selector)
    assert sel.text == "region = 'EU' AND (qty > 10 OR JMSPriority BETWEEN lo AND hi)"
    assert sel.identifiers == frozenset({"region", "qty", "JMSPriority", "lo", "hi"})


def test_selector_constructor_compiles_and_equal_texts_are_equal() -> None:
    assert Selector("a = 1") == compile_selector("a = 1")
    assert hash(Selector("a = 1")) == hash(compile_selector("a = 1"))
    assert repr(Selector("a = 1")) == "Selector('a = 1')"


def test_matches_returns_plain_bool() -> None:
    assert matches("x = 1", x=1) is True
    assert matches("x = 1", x=2) is False
    assert matches("x = 1") is False


def test_getter_is_called_with_identifier_names() -> None:
    seen: list[str] = []

    def get(name: str) -> object:
        seen.append(name)
        return {"a": 1, "b": "x"}.get(name)

    assert compile_selector("a = 1 AND b = 'x'").matches(get)
    assert seen == ["a", "b"]


def test_getter_exceptions_propagate() -> None:
    def get(name: str) -> object:
        raise KeyError(name)

    with pytest.raises(KeyError):
        compile_selector("a = 1").matches(get)


# -- literals ------------------------------------------------------------------------------


def test_string_literal_doubled_quote_is_one_quote() -> None:
    assert matches("s = 'it''s'", s="it's")
    assert matches("s = ''''", s="'")
    assert matches("s = ''", s="")


def test_string_literal_keeps_keywords_and_operators_verbatim() -> None:
    assert matches("s = 'a AND b = (c)'", s="a AND b = (c)")


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("57", 57),
        ("-957", -957),
        ("+62", 62),
        ("9223372036854775807", 9223372036854775807),
        ("-9223372036854775808", -9223372036854775808),
    ],
)
def test_exact_numeric_literals_include_long_range(literal: str, value: int) -> None:
    assert matches(f"n = {literal}", n=value)


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("1.5", 1.5),
        ("1e3", 1000.0),
        ("1E3", 1000.0),
        ("1.5E-2", 0.015),
        ("7.", 7.0),
        (".5", 0.5),
        ("-57.9E2", -5790.0),
        ("6.2e+1", 62.0),
    ],
)
def test_approximate_numeric_literal_forms(literal: str, value: float) -> None:
    assert matches(f"n = {literal}", n=value)


@pytest.mark.parametrize("word", ["TRUE", "true", "True", "tRuE"])
def test_true_literal_is_case_insensitive(word: str) -> None:
    assert matches(f"flag = {word}", flag=True)
    assert matches(word)


@pytest.mark.parametrize("word", ["FALSE", "false", "False"])
def test_false_literal_is_case_insensitive_and_matches_nothing(word: str) -> None:
    assert matches(f"flag = {word}", flag=False)
    assert not matches(word)


# -- identifiers ----------------------------------------------------------------------------


def test_identifiers_are_case_sensitive() -> None:
    assert matches("qty = 1", qty=1)
    assert not matches("Qty = 1", qty=1)


def test_identifiers_follow_java_rules_for_dollar_underscore_digits_and_unicode() -> None:
    props = {"$x": 1, "_y": 2, "a1$_": 3, "größe": 4, "名前": 5}
    sel = compile_selector("$x = 1 AND _y = 2 AND a1$_ = 3 AND größe = 4 AND 名前 = 5")
    assert sel.matches(props.get)


def test_identifiers_may_contain_keywords_as_substrings() -> None:
    assert matches("ORDER = 1 AND android = 2 AND NOTE = 3", ORDER=1, android=2, NOTE=3)


@pytest.mark.parametrize(
    "text", ["a between 1 and 3 or b is null", "a BeTwEeN 1 AnD 3 Or b Is NuLl"]
)
def test_keywords_are_case_insensitive(text: str) -> None:
    assert matches(text, a=2, b=1)
    assert matches(text, a=9)
    assert not matches(text, a=9, b=1)


@pytest.mark.parametrize(
    "text",
    [
        "s not in ('x') and s not like 'y!%' escape '!'",
        "s Not In ('x') AnD s nOt LiKe 'y!%' EsCaPe '!'",
    ],
)
def test_negated_keywords_and_escape_are_case_insensitive(text: str) -> None:
    assert matches(text, s="z")
    assert not matches(text, s="x")
    assert not matches(text, s="y%")
    assert matches(text, s="yz")


def test_bare_boolean_identifier_at_top_level_is_its_truth_value() -> None:
    assert matches("flag", flag=True)
    assert not matches("flag", flag=False)
    assert truth("flag", flag=False) is False
    assert truth("flag") is None


def test_non_boolean_value_in_boolean_context_is_unknown() -> None:
    assert truth("flag", flag=5) is None
    assert truth("flag", flag="true") is None
    assert truth("flag AND TRUE", flag=1) is None


# -- header identifiers --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "name", "value"),
    [
        ("JMSPriority > 4", "JMSPriority", 7),
        ("JMSMessageID = 'ID:1'", "JMSMessageID", "ID:1"),
        ("JMSTimestamp >= 1000", "JMSTimestamp", 1500),
        ("JMSCorrelationID = 'c-1'", "JMSCorrelationID", "c-1"),
        ("JMSType = 'order'", "JMSType", "order"),
        ("JMSXDeliveryCount > 1", "JMSXDeliveryCount", 2),
        ("JMS_IBM_Format = 'MQSTR'", "JMS_IBM_Format", "MQSTR"),
    ],
)
def test_selectable_headers_and_jms_properties_come_from_the_getter(
    selector: str, name: str, value: object
) -> None:
    assert compile_selector(selector).matches({name: value}.get)


def test_null_header_values_are_unknown() -> None:
    assert truth("JMSCorrelationID = 'x'") is None
    assert matches("JMSType IS NULL")


class _Mode(enum.Enum):
    PERSISTENT = "p"
    NON_PERSISTENT = "n"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("PERSISTENT", "PERSISTENT"),
        ("NON_PERSISTENT", "NON_PERSISTENT"),
        (2, "PERSISTENT"),
        (1, "NON_PERSISTENT"),
        (_Mode.PERSISTENT, "PERSISTENT"),
        (_Mode.NON_PERSISTENT, "NON_PERSISTENT"),
    ],
)
def test_delivery_mode_compares_as_persistent_or_non_persistent_string(
    value: object, expected: str
) -> None:
    get = {"JMSDeliveryMode": value}.get
    assert compile_selector(f"JMSDeliveryMode = '{expected}'").matches(get)
    other = "NON_PERSISTENT" if expected == "PERSISTENT" else "PERSISTENT"
    assert not compile_selector(f"JMSDeliveryMode = '{other}'").matches(get)


@pytest.mark.parametrize(
    "name",
    ["JMSDestination", "JMSReplyTo", "JMSRedelivered", "JMSExpiration", "JMSDeliveryTime"],
)
def test_non_selectable_headers_are_null_and_never_looked_up(name: str) -> None:
    seen: list[str] = []

    def get(key: str) -> object:
        seen.append(key)
        return True

    assert compile_selector(f"{name} IS NULL").matches(get)
    assert not compile_selector(f"{name} = TRUE").matches(get)
    assert not compile_selector(f"NOT ({name} = TRUE)").matches(get)
    assert seen == []
    assert compile_selector(f"{name} IS NULL").identifiers == frozenset({name})


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


# -- three-valued logic ---------------------------------------------------------------------

T, F, U = True, False, None
AND_TABLE = {
    (T, T): T, (T, F): F, (T, U): U,
    (F, T): F, (F, F): F, (F, U): F,
    (U, T): U, (U, F): F, (U, U): U,
}  # fmt: skip
OR_TABLE = {
    (T, T): T, (T, F): T, (T, U): T,
    (F, T): T, (F, F): F, (F, U): U,
    (U, T): T, (U, F): U, (U, U): U,
}  # fmt: skip
NOT_TABLE = {T: F, F: T, U: U}


@pytest.mark.parametrize(("a", "b"), list(itertools.product([T, F, U], repeat=2)))
def test_and_truth_table_is_sql_three_valued(a: bool | None, b: bool | None) -> None:
    assert truth("a AND b", a=a, b=b) is AND_TABLE[a, b]


@pytest.mark.parametrize(("a", "b"), list(itertools.product([T, F, U], repeat=2)))
def test_or_truth_table_is_sql_three_valued(a: bool | None, b: bool | None) -> None:
    assert truth("a OR b", a=a, b=b) is OR_TABLE[a, b]


@pytest.mark.parametrize("a", [T, F, U])
def test_not_truth_table_is_sql_three_valued(a: bool | None) -> None:
    assert truth("NOT a", a=a) is NOT_TABLE[a]


@pytest.mark.parametrize(("a", "b", "c"), list(itertools.product([T, F, U], repeat=3)))
def test_three_operand_and_or_chains_follow_the_tables(
    a: bool | None, b: bool | None, c: bool | None
) -> None:
    assert truth("a AND b AND c", a=a, b=b, c=c) is AND_TABLE[AND_TABLE[a, b], c]
    assert truth("a OR b OR c", a=a, b=b, c=c) is OR_TABLE[OR_TABLE[a, b], c]


def test_and_with_unknown_and_false_is_false() -> None:
    assert truth("x = 1 AND y = 1", y=2) is False


def test_and_with_unknown_and_true_is_unknown() -> None:
    assert truth("x = 1 AND y = 1", y=1) is None


def test_or_with_unknown_and_true_is_true() -> None:
    assert truth("x = 1 OR y = 1", y=1) is True


def test_or_with_unknown_and_false_is_unknown() -> None:
    assert truth("x = 1 OR y = 1", y=2) is None


def test_not_unknown_is_unknown() -> None:
    assert not matches("NOT (x = 1)")
    assert not matches("x = 1")


def test_not_binds_tighter_than_and_which_binds_tighter_than_or() -> None:
    assert matches("TRUE OR TRUE AND FALSE")  # TRUE OR (TRUE AND FALSE)
    assert not matches("(TRUE OR TRUE) AND FALSE")
    assert not matches("NOT FALSE AND FALSE")  # (NOT FALSE) AND FALSE
    assert matches("NOT (FALSE AND FALSE)")
    assert matches("NOT x = 1 OR TRUE AND FALSE", x=2)  # (NOT (x = 1)) OR (...)


def test_not_applies_to_a_whole_comparison() -> None:
    assert matches("NOT x = 1", x=2)
    assert not matches("NOT x = 1", x=1)
    assert matches("NOT NOT x = 1", x=1)


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


# -- static rejection of non-boolean selectors -----------------------------------------------


@pytest.mark.parametrize("text", ["qty + 1", "'abc'", "1", "-x", "(qty * 2)", "1.5"])
def test_non_boolean_selector_is_rejected_at_compile_time(text: str) -> None:
    with pytest.raises(InvalidSelectorException, match="must be a boolean expression"):
        compile_selector(text)


@pytest.mark.parametrize("text", ["flag", "(flag)", "TRUE", "NOT flag", "flag AND other"])
def test_boolean_shaped_selectors_are_accepted(text: str) -> None:
    compile_selector(text)
