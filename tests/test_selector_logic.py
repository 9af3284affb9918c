"""Selector AND / OR / NOT: SQL three-valued logic and operator precedence
(JMS 2.0 section 3.8.1.1)."""

from __future__ import annotations

import itertools

import pytest
from selector_helpers import matches, truth

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
