"""Message selectors as the core evaluates them.

The selector language itself lives in ``jmspy.selector`` (shared with the client, which
filters client-side where a protocol cannot carry selectors); this module only adapts a
:class:`~.api.ServerMessage` (:class:`SelectedMessage`) to it: JMS header identifiers map
to message fields, everything else is a property.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .errors import SelectorError

__all__ = ["Filter", "SelectedMessage", "compile_filter", "filter_accepts"]


class SelectedMessage(Protocol):
    """The fields of a message (``ServerMessage``'s) a selector can name, typed here so
    that this module imports nothing of the core's records."""

    @property
    def properties(self) -> dict[str, Any]: ...
    @property
    def persistent(self) -> bool: ...
    @property
    def priority(self) -> int: ...
    @property
    def message_id(self) -> str: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def correlation_id(self) -> str | None: ...
    @property
    def jms_type(self) -> str | None: ...


_HEADERS: dict[str, Callable[[SelectedMessage], Any]] = {
    "JMSDeliveryMode": lambda m: "PERSISTENT" if m.persistent else "NON_PERSISTENT",
    "JMSPriority": lambda m: m.priority,
    "JMSMessageID": lambda m: m.message_id,
    "JMSTimestamp": lambda m: m.timestamp,
    "JMSCorrelationID": lambda m: m.correlation_id,
    "JMSType": lambda m: m.jms_type,
}


class _Selector(Protocol):
    """What ``jmspy.selector.compile_selector`` returns, as far as the core uses it."""

    @property
    def identifiers(self) -> frozenset[str]: ...

    def matches(self, get: Callable[[str], Any]) -> bool: ...


class Filter:
    """A compiled selector plus what the core needs to feed it cheaply.

    Most selectors name only properties: those get the message's property dict's own
    ``get`` (a C call) instead of a per-message closure that first looks for a header.
    """

    __slots__ = ("matches", "props_only", "text")

    def __init__(self, text: str, selector: _Selector) -> None:
        self.text = text
        self.matches: Callable[[Callable[[str], Any]], bool] = selector.matches
        self.props_only = not (selector.identifiers & _HEADERS.keys())

    def __repr__(self) -> str:
        return f"Filter({self.text!r})"


_filter_cache: dict[str, Filter] = {}


def compile_filter(selector: str | None) -> Filter | None:
    """Compile a selector, or None for "accept everything" (None or blank text).

    The selector package is imported here, not at module level, so the core works (and
    its other tests run) without it; compiled selectors are cached because many consumers
    and subscriptions reuse the same text.
    """
    if selector is None or not selector.strip():
        return None
    hit = _filter_cache.get(selector)
    if hit is not None:
        return hit
    from jmspy.errors import InvalidSelectorException
    from jmspy.selector import compile_selector

    try:
        compiled = Filter(selector, compile_selector(selector))
    except InvalidSelectorException as exc:
        raise SelectorError(
            f"invalid message selector: {exc}. Fix the selector text (JMS SQL-92 subset, "
            "e.g. \"region = 'EU' AND qty > 10\") or create the consumer without one.",
            selector=selector,
            position=exc.position,
        ) from exc
    if len(_filter_cache) > 1024:
        _filter_cache.clear()
    _filter_cache[selector] = compiled
    return compiled


def filter_accepts(flt: Filter, message: SelectedMessage) -> bool:
    props = message.properties
    if flt.props_only:
        return bool(flt.matches(props.get))

    def get(name: str) -> Any:
        header = _HEADERS.get(name)
        if header is not None:
            return header(message)
        return props.get(name)

    return bool(flt.matches(get))
