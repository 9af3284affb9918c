"""Evaluating a parsed selector: the value rules, and the twin that implements them.

Selectors run once per message per consumer in a broker, and on the client for
transports whose broker cannot filter, so evaluation is one of the hot paths. It has two
interchangeable twins, chosen by :func:`jmspy._speedups.load`: the Cython module
``jmspy._cext.selector_eval`` (a tree of typed nodes with C-level three-valued logic and
fast paths for exact ints, floats and strs) and the pure-Python
``jmspy._pure.selector_eval`` (nested closures). Both compile the tree once per selector
and fold constant sub-expressions; hypothesis tests hold them to identical results,
errors and getter calls.

Values are three-valued: ``True``, ``False`` and ``None`` (UNKNOWN / SQL NULL). Rules,
from JMS 2.0 section 3.8.1.1:

* Any comparison or arithmetic involving NULL is UNKNOWN.
* Only like types compare; ``int`` and ``float`` are both numeric and compare with each
  other. Comparing unlike types (a string with a number, a bool with 1, ...) is FALSE,
  not UNKNOWN. Strings and booleans support only ``=`` and ``<>``; an ordering
  comparison between two strings (possible only between two identifiers, the parser
  rejects it for literals) is FALSE. ``bool`` is never numeric.
* Values of types other than ``str``, ``bool``, ``int`` and ``float`` are unlike every
  type: comparisons with them are FALSE and arithmetic on them is UNKNOWN.
* Arithmetic on a non-number is UNKNOWN. Division by zero is UNKNOWN. Dividing two
  exact numerics truncates toward zero, as Java's ``long`` division does, so selectors
  behave as they do on Java brokers; Python ints do not overflow, unlike Java's. A result
  Python cannot represent (an int too large for a float, mixed with a float) is UNKNOWN.
* A boolean context (AND/OR/NOT, the top level) treats any value other than ``True`` /
  ``False`` as UNKNOWN, so a property holding ``5`` matches neither ``p`` nor ``NOT p``.
* ``BETWEEN``, ``NOT BETWEEN`` and ``IN`` expand exactly as the spec defines them
  (``a >= x AND a <= y``; ``a < x OR a > y``; ``a = 'x' OR ...``), so a string ``a``
  makes both ``a BETWEEN 1 AND 2`` and ``a NOT BETWEEN 1 AND 2`` FALSE. Likewise a
  non-string identifier makes ``IN``/``NOT IN`` and ``LIKE``/``NOT LIKE`` FALSE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from jmspy import twins
from jmspy.selector.headers import NULL_HEADERS, SELECTABLE_HEADERS
from jmspy.selector.nodes import Node

__all__ = [
    "NULL_HEADERS",
    "SELECTABLE_HEADERS",
    "Getter",
    "Predicate",
    "SelectorEvalModule",
    "compile_predicate",
]

#: Looks up an identifier's value for the current message; ``None`` when absent.
Getter = Callable[[str], object]


class Predicate(Protocol):
    """A compiled selector, as both twins build it."""

    def matches(self, get: Getter) -> bool:
        """True only if the selector evaluates to TRUE; FALSE and UNKNOWN give False."""
        ...

    def evaluate(self, get: Getter) -> bool | None:
        """The three-valued result: True, False or None (UNKNOWN)."""
        ...


class SelectorEvalModule(Protocol):
    """What ``jmspy._cext.selector_eval`` and ``jmspy._pure.selector_eval`` provide."""

    def compile_predicate(self, node: Node | None) -> Predicate: ...


_twin: SelectorEvalModule = twins.selector_eval


def compile_predicate(node: Node | None) -> Predicate:
    """Compile a parsed selector with the loaded twin; ``None`` matches everything."""
    return _twin.compile_predicate(node)
