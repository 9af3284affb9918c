"""Address settings matched to destination names by wildcard patterns.

Pattern syntax (Artemis / ActiveMQ style): words are separated by ``.``; ``*`` matches
exactly one word; ``#`` or ``>`` matches zero or more words, anywhere in the pattern
(``orders.#``, ``#.audit``, ``a.#.z``). Every other word matches itself literally.

Which pattern wins when several match (the rule is total, so the answer never depends on
insertion order):

1. a pattern equal to the name (no wildcards) always wins;
2. a pattern without ``#``/``>`` beats one with them (a multi-word wildcard is the
   vaguest thing a pattern can say — Artemis ranks it the same way);
3. then the longer literal prefix (number of leading literal words) wins: ``orders.eu.*``
   beats ``orders.*.fast`` for ``orders.eu.fast``;
4. then more literal words in total, then fewer wildcards in total;
5. finally the lexicographically smaller pattern text, only to stay deterministic.

The winning settings object is used whole; settings of less specific patterns are not
merged in (a pattern that wants a default should copy it).
"""

from __future__ import annotations

from collections.abc import Mapping

from .api import AddressSettings

__all__ = ["SettingsRegistry", "is_wildcard", "pattern_matches"]

_MULTI = frozenset({"#", ">"})
_SINGLE = "*"
_CACHE_LIMIT = 4096


def pattern_matches(pattern: str, name: str) -> bool:
    """True when ``name`` matches the wildcard ``pattern`` (see the module docstring)."""
    return _compiled(pattern).matches(name.split("."))


class _Matcher:
    """One pattern compiled for a non-backtracking match (the shift-and algorithm over
    words): bit ``i`` of the state means "the first ``i`` pattern words are matched".
    Each name word costs a dict lookup and a few integer operations on an ``m``-bit state,
    so a match is linear in the name's words (with ``m``, the pattern's words, bounded by
    the destination length limit). A backtracking glob match costs up to
    ``words x pattern words`` steps: a 16,000-word name against an 8,000-word pattern of
    ``#`` and literals took 24 s of the event loop.
    """

    __slots__ = ("_accept", "_multi", "_star", "_words")

    def __init__(self, pattern: str) -> None:
        words: list[str] = []
        for w in pattern.split("."):
            if w in _MULTI:
                w = "#"
                if words and words[-1] == "#":  # '#.#' is '#': one closure step suffices
                    continue
            words.append(w)
        self._words: dict[str, int] = {}
        self._star = self._multi = 0
        for i, w in enumerate(words):
            bit = 1 << i
            if w == "#":
                self._multi |= bit
            elif w == _SINGLE:
                self._star |= bit
            else:
                self._words[w] = self._words.get(w, 0) | bit
        self._accept = 1 << len(words)

    def matches(self, words: list[str]) -> bool:
        multi, star, lookup = self._multi, self._star, self._words
        state = 1 | (multi & 1) << 1  # start, and past a leading '#' that matched nothing
        for w in words:
            # one word: a literal or '*' advances; a '#' absorbs it and stays
            state = ((state & (lookup.get(w, 0) | star)) << 1) | (state & multi)
            if not state:
                return False
            state |= (state & multi) << 1  # a '#' may also match no (further) word
        return bool(state & self._accept)


_compiled_cache: dict[str, _Matcher] = {}


def _compiled(pattern: str) -> _Matcher:
    m = _compiled_cache.get(pattern)
    if m is None:
        if len(_compiled_cache) >= _CACHE_LIMIT:
            _compiled_cache.clear()
        m = _compiled_cache[pattern] = _Matcher(pattern)
    return m


def _specificity(pattern: str) -> tuple[int, int, int, int, str]:
    """Sort key: smaller is more specific (see rule list in the module docstring)."""
    words = pattern.split(".")
    has_multi = any(w in _MULTI for w in words)
    prefix = 0
    for w in words:
        if w in _MULTI or w == _SINGLE:
            break
        prefix += 1
    wild = sum(1 for w in words if w in _MULTI or w == _SINGLE)
    literal = len(words) - wild
    return (1 if has_multi else 0, -prefix, -literal, wild, pattern)


def is_wildcard(pattern: str) -> bool:
    """True when ``pattern`` has a ``*``, ``#`` or ``>`` word (matches more than itself)."""
    return any(w in _MULTI or w == _SINGLE for w in pattern.split("."))



class SettingsRegistry:
    """Settings by pattern, with a per-name cache because lookups happen per destination
    creation and per ``settings_for`` call while patterns change rarely."""

    __slots__ = ("_cache", "_exact", "_wild", "default")

    def __init__(
        self, default: AddressSettings, patterns: Mapping[str, AddressSettings] | None = None
    ) -> None:
        self.default = default
        self._exact: dict[str, AddressSettings] = {}
        self._wild: list[tuple[tuple[int, int, int, int, str], str, AddressSettings]] = []
        self._cache: dict[str, AddressSettings] = {}
        for pattern, settings in (patterns or {}).items():
            self.set(pattern, settings)

    def set(self, pattern: str, settings: AddressSettings) -> None:
        """Add or replace the settings of ``pattern``; later lookups see the change."""
        if not pattern or any(not w for w in pattern.split(".")):
            raise ValueError(
                f"invalid address-settings pattern {pattern!r}: words separated by '.' "
                "must not be empty (use '*' for one word, '#' for any number)"
            )
        if is_wildcard(pattern):
            self._wild = [e for e in self._wild if e[1] != pattern]
            self._wild.append((_specificity(pattern), pattern, settings))
            self._wild.sort(key=lambda e: e[0])
        else:
            self._exact[pattern] = settings
        self._cache.clear()

    def remove(self, pattern: str) -> None:
        """Forget ``pattern`` (no error when absent)."""
        self._exact.pop(pattern, None)
        self._wild = [e for e in self._wild if e[1] != pattern]
        self._cache.clear()

    def patterns(self) -> dict[str, AddressSettings]:
        """Every configured pattern (exact names included) and its settings."""
        out = dict(self._exact)
        out.update({p: s for _, p, s in self._wild})
        return out

    def match(self, name: str) -> AddressSettings:
        """The settings that apply to destination ``name`` (the default when none match)."""
        hit = self._cache.get(name)
        if hit is not None:
            return hit
        found = self._exact.get(name)
        if found is None:
            words = name.split(".")
            for _, pattern, settings in self._wild:  # sorted most specific first
                if _compiled(pattern).matches(words):
                    found = settings
                    break
            else:
                found = self.default
        if len(self._cache) >= _CACHE_LIMIT:  # temp queue names would grow it forever
            self._cache.clear()
        self._cache[name] = found
        return found
