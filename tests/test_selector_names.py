"""Selector literals and identifiers: string/number/boolean literal forms, identifier
and keyword rules, and which JMS header names are selectable (JMS 2.0 section 3.8.1.1)."""

from __future__ import annotations

import enum

import pytest
from selector_helpers import matches, truth

from jmspy.selector import compile_selector

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
