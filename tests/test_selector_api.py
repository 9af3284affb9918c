"""The selector API: empty selectors, caching, the getter contract, and the static
rejection of selectors that are not boolean (JMS 2.0 section 3.8.1.1)."""

from __future__ import annotations

import pytest
from selector_helpers import matches

from jmspy.errors import InvalidSelectorException
from jmspy.selector import Selector, compile_selector

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


def test_evaluate_tells_true_false_and_unknown_apart() -> None:
    selector = compile_selector("qty > 10 OR region = 'EU'")
    assert selector.evaluate({"qty": 12}.get) is True
    assert selector.evaluate({"qty": 1, "region": "US"}.get) is False
    assert selector.evaluate({"qty": 1}.get) is None  # FALSE OR UNKNOWN
    assert compile_selector(None).evaluate({}.get) is True


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


# -- static rejection of non-boolean selectors -----------------------------------------------


@pytest.mark.parametrize("text", ["qty + 1", "'abc'", "1", "-x", "(qty * 2)", "1.5"])
def test_non_boolean_selector_is_rejected_at_compile_time(text: str) -> None:
    with pytest.raises(InvalidSelectorException, match="must be a boolean expression"):
        compile_selector(text)


@pytest.mark.parametrize("text", ["flag", "(flag)", "TRUE", "NOT flag", "flag AND other"])
def test_boolean_shaped_selectors_are_accepted(text: str) -> None:
    compile_selector(text)
