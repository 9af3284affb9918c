"""JMS message selectors: the SQL-92 conditional-expression subset of JMS 2.0 §3.8.1.1.

Usage::

    from jmspy.selector import compile_selector

    sel = compile_selector("region = 'EU' AND qty > 10")
    sel.matches({"region": "EU", "qty": 12}.get)   # True
    sel.evaluate({"qty": 12}.get)                  # None: UNKNOWN (region is NULL)

``compile_selector`` parses and compiles once (results are cached by text, so every
consumer with the same selector shares one :class:`Selector`); ``matches`` then runs
the pre-compiled evaluator (:mod:`jmspy.selector.evaluate`) per message. Bad syntax raises
:class:`~jmspy.errors.InvalidSelectorException` with the 0-based ``position`` of the
offending token and the selector shown with a caret under it.

What the getter supplies, and identifier rules (see :mod:`jmspy.selector.evaluate` for
the full comparison / NULL semantics):

* ``get(name)`` returns the property or header value, or ``None`` when absent (NULL).
  Exceptions raised by ``get`` propagate out of ``matches``.
* The selectable headers ``JMSDeliveryMode``, ``JMSPriority``, ``JMSMessageID``,
  ``JMSTimestamp``, ``JMSCorrelationID`` and ``JMSType`` and the ``JMSX...`` /
  ``JMS_...`` properties are looked up through ``get`` like any property.
  ``JMSDeliveryMode`` compares as the string ``'PERSISTENT'`` or ``'NON_PERSISTENT'``;
  a getter may return those strings, the JMS ints 2 / 1, or an enum with that ``name``.
* Every other name starting with ``JMS`` (``JMSDestination``, ``JMSReplyTo``,
  ``JMSRedelivered``, ``JMSExpiration``, ``JMSDeliveryTime``, ...) is not selectable by
  the spec and is always NULL; ``get`` is never called for it.
* An empty or whitespace-only selector (or ``None``) matches every message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final

from jmspy.selector.evaluate import (
    NULL_HEADERS,
    SELECTABLE_HEADERS,
    Getter,
    Predicate,
    compile_predicate,
)
from jmspy.selector.nodes import Ident, Node, children
from jmspy.selector.parser import parse

__all__ = [
    "NULL_HEADERS",
    "SELECTABLE_HEADERS",
    "Getter",
    "Selector",
    "compile_selector",
]

#: How many distinct selector texts :func:`compile_selector` keeps compiled.
CACHE_SIZE: Final = 1024


def _identifiers(root: Node) -> frozenset[str]:
    names: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Ident):
            names.add(node.name)
        stack.extend(children(node))
    return frozenset(names)


class Selector:
    """A compiled, immutable message selector; safe to share between threads.

    Prefer :func:`compile_selector`, which caches; constructing ``Selector(text)``
    directly always recompiles.

    ``matches(get)`` is True only if the selector evaluates to TRUE for the message
    ``get`` describes; FALSE and UNKNOWN give False. It is the compiled predicate's own
    bound method, stored per instance, so filtering a message costs no extra Python call
    on top of the evaluator's.
    """

    __slots__ = ("_identifiers", "_predicate", "_text", "matches")

    _text: str
    _identifiers: frozenset[str]
    _predicate: Predicate
    matches: Callable[[Getter], bool]

    def __init__(self, text: str | None = None) -> None:
        """Compile ``text``; raises InvalidSelectorException if it is not a valid selector."""
        source = "" if text is None else text
        if not isinstance(source, str):
            raise TypeError(f"a selector must be a str or None, not {type(source).__name__}")
        node = parse(source) if source.strip() else None
        self._text = source
        self._identifiers = frozenset() if node is None else _identifiers(node)
        self._predicate = compile_predicate(node)
        self.matches = self._predicate.matches

    @property
    def text(self) -> str:
        """The selector source exactly as given (``""`` for ``None``)."""
        return self._text

    @property
    def identifiers(self) -> frozenset[str]:
        """Every identifier the selector references, e.g. to fetch only those properties."""
        return self._identifiers

    def evaluate(self, get: Getter) -> bool | None:
        """The selector's three-valued result: True, False or None (UNKNOWN)."""
        return self._predicate.evaluate(get)

    def __repr__(self) -> str:
        return f"Selector({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selector):
            return NotImplemented
        return self._text == other._text

    def __hash__(self) -> int:
        return hash(self._text)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _compile_cached(text: str) -> Selector:
    return Selector(text)


def compile_selector(text: str | None) -> Selector:
    """Return the compiled :class:`Selector` for ``text``, from a cache of recent ones.

    ``None``, ``""`` and whitespace-only text give a selector that matches everything.
    Raises :class:`~jmspy.errors.InvalidSelectorException` for invalid selectors (those
    are not cached, so each attempt re-raises with a fresh exception).
    """
    return _compile_cached("" if text is None else text)
