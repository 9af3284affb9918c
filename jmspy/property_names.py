"""The one rule for property names: the Open MQ (camelCase) name is canonical, and its
snake_case twin is accepted in its place everywhere a property name is.

Why one module: Open MQ users type ``imqConsumerFlowLimit`` and Python users type
``consumer_flow_limit``; before this rule the connection factory took one spelling and
the worker pool the other. Now every table of property names -- the connection factory's
(:data:`jmspy.properties.PROPERTIES`, for constructor keywords and ``factory[...]``) and
the worker pool's activation properties (:mod:`jmspy.pool.activation`) -- is a
:class:`PropertyNames` built here, with the twin derived by :func:`snake_case`, so the two
cannot disagree. Giving both spellings of one property at once is an error naming both:
which one should win is a guess we refuse to make.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import InvalidConfigurationException

__all__ = ["PropertyNames", "snake_case"]

#: Open MQ's prefix, which the snake_case twin drops (imqAddressList -> address_list).
_OPEN_MQ_PREFIX = "imq"
_WORD_BOUNDARIES = (
    re.compile(r"([A-Z]+)([A-Z][a-z])"),  # an acronym before a word: "DMQName" -> DMQ_Name
    re.compile(r"([a-z0-9])([A-Z])"),  # a lower-case letter or digit before a capital
)


def snake_case(name: str) -> str:
    """The snake_case twin of a camelCase property name.

    >>> snake_case("imqConsumerFlowLimit"), snake_case("clientID")
    ('consumer_flow_limit', 'client_id')
    >>> snake_case("sendUndeliverableMsgsToDMQ")
    'send_undeliverable_msgs_to_dmq'
    """
    if name.startswith(_OPEN_MQ_PREFIX) and name[len(_OPEN_MQ_PREFIX):][:1].isupper():
        name = name[len(_OPEN_MQ_PREFIX):]
    for boundary in _WORD_BOUNDARIES:
        name = boundary.sub(r"\1_\2", name)
    return name.lower()


class PropertyNames:
    """One table of property names: each canonical name and its snake_case twin.

    ``what`` names the table in errors ("connection factory property").
    ``extra_twins`` adds other accepted spellings of a canonical name (the worker pool's
    ``clientId`` beside Open MQ's ``clientID``)."""

    def __init__(self, canonical: Iterable[str], *, what: str,
                 extra_twins: Mapping[str, str] | None = None) -> None:
        self.what = what
        self._canonical: tuple[str, ...] = tuple(canonical)
        self._twins: dict[str, str] = {}
        self._spellings: dict[str, str] = {}
        for name in self._canonical:
            twin = snake_case(name)
            self._twins[name] = twin
            self._add(name, name)
            if twin != name:
                self._add(twin, name)
        for spelling, name in (extra_twins or {}).items():
            self._add(spelling, name)

    def _add(self, spelling: str, name: str) -> None:
        other = self._spellings.setdefault(spelling, name)
        if other != name:  # a table that breaks the rule is a bug of ours, caught at import
            raise ValueError(f"{spelling!r} would stand for both {other!r} and {name!r}")

    @property
    def canonical_names(self) -> tuple[str, ...]:
        return self._canonical

    def twin(self, name: str) -> str:
        """The snake_case twin of canonical ``name``."""
        return self._twins[name]

    def canonical(self, spelling: str) -> str | None:
        """The canonical name ``spelling`` stands for (itself or a twin), or None."""
        return self._spellings.get(spelling)

    def suggestion(self, spelling: str) -> str:
        """`` Did you mean 'x'?`` for an unknown name close to a known one, else ``""``."""
        import difflib

        close = difflib.get_close_matches(spelling, self._spellings, n=1)
        if not close:
            return ""
        name = self._spellings[close[0]]
        return f" Did you mean {name!r}?" if close[0] == name else (
            f" Did you mean {close[0]!r} ({name})?")

    def resolve(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """``given`` keyed by canonical names; a name the table does not know is kept as
        it was (the caller refuses it with its own message). Both spellings of one
        property in ``given`` raise InvalidConfigurationException naming both."""
        resolved: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        for spelling, value in given.items():
            name = self.canonical(spelling) or spelling
            if name in resolved:
                raise InvalidConfigurationException(
                    f"{self.what} {name!r} given twice, as {spelled[name]!r} and as "
                    f"{spelling!r} (the same property in two spellings); give it once")
            resolved[name] = value
            spelled[name] = spelling
        return resolved
