"""LIKE patterns: validation/splitting at compile time and a backtracking-safe matcher."""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["LikePart", "like_matcher", "split_like_pattern"]

#: One piece of a LIKE pattern: ``("text", s)`` matches ``s`` literally, ``("one", "")``
#: is ``_`` (exactly one character) and ``("many", "")`` is ``%`` (any run).
LikePart = tuple[str, str]


def split_like_pattern(pattern: str, escape: str | None) -> tuple[LikePart, ...] | str:
    """Split a LIKE pattern into parts, or return an error message.

    SQL-92 requires the escape character to be followed by ``_``, ``%`` or itself; any
    other use is an error rather than a silent literal, because it is almost always a
    mistake in the pattern.
    """
    parts: list[LikePart] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            parts.append(("text", "".join(text)))
            text.clear()

    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if escape is not None and ch == escape:
            if i + 1 >= n:
                return f"the LIKE pattern ends with the escape character {escape!r}"
            nxt = pattern[i + 1]
            if nxt not in ("_", "%", escape):
                return (
                    f"the escape character {escape!r} in the LIKE pattern must be followed "
                    f"by '_', '%' or itself, found {nxt!r}"
                )
            text.append(nxt)
            i += 2
            continue
        if ch == "_":
            flush()
            parts.append(("one", ""))
        elif ch == "%":
            flush()
            if not parts or parts[-1] != ("many", ""):
                parts.append(("many", ""))
        else:
            text.append(ch)
        i += 1
    flush()
    return tuple(parts)


def _segment_regex(segment: list[LikePart]) -> re.Pattern[str]:
    source = "".join(re.escape(text) if kind == "text" else "." for kind, text in segment)
    return re.compile(source, re.DOTALL)


def _segment_length(segment: list[LikePart]) -> int:
    return sum(len(text) if kind == "text" else 1 for kind, text in segment)


def like_matcher(parts: tuple[LikePart, ...]) -> Callable[[str], bool]:
    """Build a ``str -> bool`` matcher for a pre-split LIKE pattern.

    Pattern text is escaped, never interpreted as a regex, so ``'a.b%'`` matches only a
    literal dot. The pattern is split at ``%`` into fixed-length segments matched
    left to right (first anchored at the start, last at the end, the others at their
    leftmost position). That is correct for ``%`` and runs in O(len(value) *
    len(pattern)), unlike a single ``.*``-regex, which backtracks exponentially on
    patterns such as ``'%a%a%a%a%b'`` and would let one selector stall a broker.
    """
    segments: list[list[LikePart]] = [[]]
    for part in parts:
        if part[0] == "many":
            segments.append([])
        else:
            segments[-1].append(part)
    plain = all(kind == "text" for segment in segments for kind, _ in segment)
    texts = ["".join(text for _, text in segment) for segment in segments]

    if len(segments) == 1:
        if plain:
            literal = texts[0]
            return lambda value: value == literal
        whole = _segment_regex(segments[0])
        return lambda value: whole.fullmatch(value) is not None
    if plain and len(segments) == 2:
        prefix, suffix = texts
        min_len = len(prefix) + len(suffix)
        return lambda value: (
            len(value) >= min_len and value.startswith(prefix) and value.endswith(suffix)
        )
    if plain and len(segments) == 3 and not texts[0] and not texts[2]:
        middle = texts[1]
        return lambda value: middle in value

    first_len = _segment_length(segments[0])
    first = _segment_regex(segments[0])
    last_len = _segment_length(segments[-1])
    last = _segment_regex(segments[-1])
    middles = [_segment_regex(segment) for segment in segments[1:-1] if segment]
    total = first_len + last_len + sum(_segment_length(s) for s in segments[1:-1])

    def match(value: str) -> bool:
        if len(value) < total:
            return False
        if first.match(value) is None:
            return False
        end = len(value) - last_len
        if last.match(value, end) is None:
            return False
        pos = first_len
        for regex in middles:
            found = regex.search(value, pos, end)
            if found is None:
                return False
            pos = found.end()
        return True

    return match
