"""Helpers shared by the selector semantics tests (tests/test_selector_*.py).

``truth()`` tells TRUE, FALSE and UNKNOWN apart through the public API only: an
expression is FALSE when its negation matches, UNKNOWN when neither it nor its negation
matches. (``Selector.evaluate`` gives the same answer directly; going through
``matches`` also proves that NOT is three-valued.)
"""

from __future__ import annotations

from jmspy.selector import compile_selector


def matches(selector: str | None, **props: object) -> bool:
    """Whether ``selector`` matches a message whose properties are ``props``."""
    return compile_selector(selector).matches(props.get)


def truth(expr: str, **props: object) -> bool | None:
    """TRUE, FALSE or UNKNOWN (None) for ``expr`` over ``props``."""
    if matches(expr, **props):
        return True
    if matches(f"NOT ({expr})", **props):
        return False
    return None
