"""The query options of connection URLs (``stomp://h:p?heartbeat=0``), checked against
the one table each scheme declares.

Why a table: a URL's options used to be read with ``parse_qs`` and ``.get()`` in each
transport, so a misspelt or unknown one (``?dialekt=``, ``vm://x?foo=1``, ``?ssl=true``)
was dropped without a word and ``?sync_send=no`` read as true. Now a transport reads its
options only through its :class:`OptionTable`: what the table lists is what the transport
reads, anything else is refused naming the known options and the closest one, and every
value is converted by its option's kind (booleans take true/false/1/0 and nothing else).
docs/transports.md and docs/mqtt.md list each table; a test holds the two to agree.

A transport declares its tables as ``url_options``, a mapping from scheme to table, on
its factory (:mod:`jmspy.transport` checks a factory's URLs with it when the
ConnectionFactory is made, before any socket). A scheme that adds options to another's,
as a TLS scheme adds its certificate options to the plain one's, is one line:
``PLAIN.plus("stomp+ssl", TLS_OPTIONS)``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlsplit

from .errors import InvalidConfigurationException

__all__ = ["OptionTable", "UrlOption", "choice", "flag", "number", "parse_addresses", "text",
           "whole"]

#: Option names that ask for TLS: on a plain scheme they are refused pointing to the
#: scheme that speaks TLS, never read as "connect in plain text anyway".
_TLS_WORDS = frozenset({"ssl", "tls", "use_ssl", "use_tls", "secure", "ssl_enabled",
                        "tls_enabled",
                        # the TLS schemes' own options (jmspy.tls.TLS_URL_OPTIONS)
                        "ca_file", "ca_path", "cert_file", "key_file", "key_password", "verify"})
_TRUE = ("true", "1")
_FALSE = ("false", "0")


@dataclass(frozen=True, slots=True)
class UrlOption:
    """One query option: its name, its default (the value read when the URL leaves it
    out), what it means, how its text becomes a value and how the docs show it."""

    name: str
    default: Any
    meaning: str
    #: how the docs' table shows the default (``10000``, ``(none)``)
    shown_default: str
    #: what to write, for errors: "true or false", "a whole number of ms, 0 to 1000"
    accepts: str
    #: the text -> the value, or None when the text is not a valid value
    convert: Callable[[str], Any]
    #: a value the option takes, other than the default where there is one (for tests)
    example: str

    def read(self, scheme: str, raw: str) -> Any:
        value = self.convert(raw)
        if value is None:
            raise InvalidConfigurationException(
                f"{scheme}:// {self.name}={raw!r}: use {self.accepts} "
                f"(default {self.shown_default})")
        return value


def flag(name: str, default: bool, meaning: str) -> UrlOption:
    """A boolean: ``true``/``false``/``1``/``0`` in any case, nothing else."""

    def convert(raw: str) -> bool | None:
        low = raw.lower()
        return True if low in _TRUE else False if low in _FALSE else None

    return UrlOption(name, default, meaning, str(default).lower(), "true or false (or 1/0)",
                     convert, str(not default).lower())


def whole(name: str, default: int, meaning: str, *, unit: str, minimum: int,
          maximum: int | None = None, shown_default: str | None = None) -> UrlOption:
    """A whole number of ``unit`` from ``minimum`` to ``maximum`` (None: no upper bound)."""

    def convert(raw: str) -> int | None:
        if not (raw.isascii() and raw.isdigit()):
            return None
        value = int(raw)
        ok = value >= minimum and (maximum is None or value <= maximum)
        return value if ok else None

    most = "" if maximum is None else f" and at most {maximum}"
    return UrlOption(name, default, meaning, shown_default or str(default),
                     f"a whole number of {unit}, at least {minimum}{most}", convert,
                     str(minimum if default != minimum else minimum + 1))


def number(name: str, default: float, meaning: str, *, unit: str) -> UrlOption:
    """A positive, finite number of ``unit`` (fractions allowed: ``0.5``)."""

    def convert(raw: str) -> float | None:
        try:
            value = float(raw)
        except ValueError:
            return None
        return value if math.isfinite(value) and value > 0 else None

    return UrlOption(name, default, meaning, f"{default:g}",
                     f"a number of {unit} greater than 0", convert, f"{default / 4:g}")


def choice(name: str, choices: Iterable[str], default: str | None, meaning: str, *,
           shown_default: str | None = None) -> UrlOption:
    """One of ``choices``, as written (None as the default: the URL did not choose)."""
    allowed = tuple(choices)

    def convert(raw: str) -> str | None:
        return raw if raw in allowed else None

    shown = shown_default or (default if default is not None else "(none)")
    accepts = f"only {allowed[0]}" if len(allowed) == 1 else f"one of {', '.join(allowed)}"
    return UrlOption(name, default, meaning, shown, accepts, convert,
                     next(c for c in (*allowed[1:], *allowed) if c != default))


def text(name: str, default: str, meaning: str) -> UrlOption:
    """Any non-empty text without control characters (a value that ends up in a protocol
    header, where a line break or NUL would end it)."""

    def convert(raw: str) -> str | None:
        return raw if raw and raw.isprintable() else None

    return UrlOption(name, default, meaning, default,
                     "a non-empty value without control characters", convert, f"{default}x")


class OptionTable(Mapping[str, UrlOption]):
    """The query options one scheme's transport reads, by name.

    ``tls_scheme`` names the scheme to use instead when a URL of this (plain) scheme asks
    for TLS (``?ssl=true``): None where there is none (``vm://`` has no socket).
    ``shared_by_list``: the transport takes the options of an address list's first URL
    for every broker of it (``mqtt://``), so :meth:`parse_list` refuses a later entry
    whose options differ, which would be ignored; otherwise each entry has its own."""

    def __init__(self, scheme: str, options: Iterable[UrlOption], *,
                 tls_scheme: str | None = None, shared_by_list: bool = False) -> None:
        self.scheme = scheme
        self.tls_scheme = tls_scheme
        self.shared_by_list = shared_by_list
        self._options: dict[str, UrlOption] = {}
        for option in options:
            if option.name in self._options:  # a table of ours that breaks this is a bug
                raise ValueError(f"{scheme}:// option {option.name!r} declared twice")
            self._options[option.name] = option

    def __getitem__(self, name: str) -> UrlOption:
        return self._options[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)

    def plus(self, scheme: str, more: Iterable[UrlOption] | Mapping[str, UrlOption]
             ) -> OptionTable:
        """This table's options and ``more``, for ``scheme`` (a TLS variant of a plain
        scheme: its options are the plain one's and the TLS ones)."""
        extra = more.values() if isinstance(more, Mapping) else more
        return OptionTable(scheme, [*self._options.values(), *extra], tls_scheme=scheme,
                           shared_by_list=self.shared_by_list)

    def reference_table(self) -> str:
        """The Markdown table of these options (docs/transports.md and docs/mqtt.md embed
        this output, so the docs list exactly what the transport reads)."""
        rows = ["| URL option | default | takes | meaning |", "| --- | --- | --- | --- |"]
        rows += [f"| `{o.name}` | `{o.shown_default}` | {o.accepts} | {o.meaning} |"
                 for o in self._options.values()]
        return "\n".join(rows)

    def parse(self, url: SplitResult | str) -> dict[str, Any]:
        """Every option of the table, by name: the URL's value converted, else the
        default. Raises InvalidConfigurationException for an option the table does not
        list (naming the known ones and the closest), an option given twice, or a value
        its option does not take."""
        parts = urlsplit(url) if isinstance(url, str) else url
        given: dict[str, str] = {}
        for name, raw in parse_qsl(parts.query, keep_blank_values=True):
            if name not in self._options:
                raise self._unknown(name, raw)
            if name in given:
                raise InvalidConfigurationException(
                    f"{self.scheme}:// option {name!r} given twice ({given[name]!r} and "
                    f"{raw!r}): give it once")
            given[name] = raw
        return {name: option.read(self.scheme, given[name]) if name in given
                else option.default for name, option in self._options.items()}

    def parse_list(self, urls: Sequence[SplitResult]) -> list[dict[str, Any]]:
        """:meth:`parse` of each URL of an address list, in order, and with
        ``shared_by_list`` the check that every entry's options are the first's."""
        return parse_addresses({url.scheme.lower(): self for url in urls}, urls)

    def _shared(self, urls: Sequence[SplitResult], parsed: Sequence[Mapping[str, Any]],
                names: Iterable[str]) -> None:
        """With ``shared_by_list``: refuse an entry whose options among ``names`` differ
        from the first entry's (they would be ignored)."""
        if not self.shared_by_list:
            return
        keys = list(names)
        first = {name: parsed[0][name] for name in keys}
        for url, options in zip(urls[1:], parsed[1:], strict=True):
            if {name: options[name] for name in keys} != first:
                raise InvalidConfigurationException(
                    f"address list entry {url.geturl()!r} has other URL options than the "
                    f"first, {urls[0].geturl()!r}: a {self.scheme}:// connection takes the "
                    "first address's options for every broker of the list, so these would "
                    "be ignored; give the options once, on the first address")

    def _unknown(self, name: str, raw: str) -> InvalidConfigurationException:
        known = ", ".join(self._options) or "none"
        if name.lower() in _TLS_WORDS or name.lower().startswith(("ssl_", "tls_")):
            if self.tls_scheme == self.scheme:
                why = f"{self.scheme}:// always speaks TLS: leave {name}= out"
            elif self.tls_scheme:
                why = (f"{self.scheme}:// connects in plain text, whatever its options say; "
                       f"use {self.tls_scheme}:// for TLS (the TLS schemes are stomp+ssl:// "
                       "and mqtts://)")
            else:
                why = (f"{self.scheme}:// is a broker in this process, with no socket to "
                       "secure; to reach a broker over TLS use stomp+ssl:// or mqtts://")
            return InvalidConfigurationException(
                f"{self.scheme}:// does not take {name}={raw!r}: {why}. Options of "
                f"{self.scheme}://: {known}")
        close = difflib.get_close_matches(name, self._options, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return InvalidConfigurationException(
            f"unknown {self.scheme}:// URL option {name!r}.{hint} Options of "
            f"{self.scheme}://: {known}")


def parse_addresses(tables: Mapping[str, OptionTable], urls: Sequence[SplitResult]
                    ) -> list[dict[str, Any]]:
    """Each URL of an address list parsed by its own scheme's table (a list may mix a
    plain scheme and its TLS twin, ``stomp://`` and ``stomp+ssl://``), in order. Where
    the first entry's table is ``shared_by_list``, the options every entry's table has
    (the plain ones: TLS settings stay per address) must be the first entry's."""
    parsed = [tables[url.scheme.lower()].parse(url) for url in urls]
    first = tables[urls[0].scheme.lower()]
    common = set(first)
    for url in urls[1:]:
        common &= set(tables[url.scheme.lower()])
    first._shared(urls, parsed, [name for name in first if name in common])
    return parsed
