"""Wildcard address settings: matching and the "most specific wins" rule."""

from __future__ import annotations

import pytest

from jmspy.broker_ref.core import AddressSettings, SettingsRegistry, pattern_matches


def s(limit: int) -> AddressSettings:
    return AddressSettings(consumer_flow_limit=limit)


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("a.*", "a.b", True),
        ("a.*", "a", False),
        ("a.*", "a.b.c", False),
        ("a.#", "a", True),
        ("a.#", "a.b.c", True),
        ("a.>", "a.b.c", True),
        ("#", "anything.at.all", True),
        ("a.#.z", "a.z", True),
        ("a.#.z", "a.b.c.z", True),
        ("a.#.z", "a.b.c", False),
        ("#.audit", "x.y.audit", True),
        ("*.*", "a.b", True),
        ("a.b", "a.b", True),
        ("a.b", "a.c", False),
    ],
)
def test_pattern_matches(pattern: str, name: str, expected: bool) -> None:
    assert pattern_matches(pattern, name) is expected


def test_exact_match_wins() -> None:
    reg = SettingsRegistry(s(0), {"orders.#": s(1), "orders.eu": s(2), "*.eu": s(3)})
    assert reg.match("orders.eu").consumer_flow_limit == 2


def test_default_when_nothing_matches() -> None:
    reg = SettingsRegistry(s(7), {"orders.#": s(1)})
    assert reg.match("invoices").consumer_flow_limit == 7


def test_single_word_wildcard_beats_multi_word() -> None:
    reg = SettingsRegistry(s(0), {"a.b.#": s(1), "a.*.c": s(2)})
    assert reg.match("a.b.c").consumer_flow_limit == 2


def test_longer_literal_prefix_wins() -> None:
    reg = SettingsRegistry(s(0), {"orders.*.fast": s(1), "orders.eu.*": s(2), "*.eu.fast": s(3)})
    assert reg.match("orders.eu.fast").consumer_flow_limit == 2
    reg = SettingsRegistry(s(0), {"#": s(1), "orders.#": s(2), "orders.eu.#": s(3)})
    assert reg.match("orders.eu.x").consumer_flow_limit == 3
    assert reg.match("orders.us").consumer_flow_limit == 2
    assert reg.match("other").consumer_flow_limit == 1


def test_runtime_set_invalidates_cache() -> None:
    reg = SettingsRegistry(s(0))
    assert reg.match("x.y").consumer_flow_limit == 0
    reg.set("x.*", s(5))
    assert reg.match("x.y").consumer_flow_limit == 5
    reg.remove("x.*")
    assert reg.match("x.y").consumer_flow_limit == 0


def test_empty_word_pattern_rejected() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        SettingsRegistry(s(0), {"a..b": s(1)})
