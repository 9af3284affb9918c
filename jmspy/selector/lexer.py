"""Tokenizer for JMS message selectors, and the shared error formatter.

The lexer is separate from the parser so that every character-level mistake (an
unterminated string, a stray ``#``, ``1e``) is reported at the exact offset of the bad
character, before the parser has to guess what the user meant.
"""

from __future__ import annotations

import unicodedata
from typing import Final, NamedTuple

from jmspy.errors import InvalidSelectorException

__all__ = [
    "BOOL",
    "EOF",
    "IDENT",
    "KEYWORD",
    "KEYWORDS",
    "NUMBER",
    "OP",
    "STRING",
    "Token",
    "describe",
    "selector_error",
    "tokenize",
]

# Token kinds. Plain strings (not an Enum) because the parser compares them in hot loops
# and the values double as readable debugging output.
STRING: Final = "STRING"
NUMBER: Final = "NUMBER"
BOOL: Final = "BOOL"
IDENT: Final = "IDENT"
KEYWORD: Final = "KEYWORD"
OP: Final = "OP"
EOF: Final = "EOF"

#: Reserved words (JMS 2.0 section 3.8.1.1). Matched case-insensitively; TRUE and FALSE
#: become BOOL literal tokens, the rest KEYWORD tokens carrying the upper-cased word.
KEYWORDS: Final = frozenset(
    {"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE"}
)

#: Whitespace per the spec: space, horizontal tab, form feed and line terminators.
_WHITESPACE: Final = frozenset(" \t\f\r\n")

_TWO_CHAR_OPS: Final = frozenset({"<=", ">=", "<>"})
_ONE_CHAR_OPS: Final = frozenset("=<>+-*/(),")

# Unicode categories accepted by Java's Character.isJavaIdentifierStart / ...Part, which
# the spec names as the identifier rule. Letters, letter numbers, currency symbols ($) and
# connecting punctuation (_) may start an identifier; digits and combining marks may
# continue one.
_START_CATEGORIES: Final = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Sc", "Pc"})
_PART_CATEGORIES: Final = _START_CATEGORIES | {"Nd", "Mn", "Mc"}


class Token(NamedTuple):
    """One lexical token.

    ``value`` is the decoded literal (``str`` with ``''`` unescaped, ``int``, ``float`` or
    ``bool``), the identifier name, the upper-cased keyword or the operator text.
    ``pos`` is the 0-based offset of the token's first character; ``text`` is the exact
    source slice, kept so error messages can quote what the user typed.
    """

    kind: str
    value: str | int | float | bool
    pos: int
    text: str


def _is_ident_start(ch: str) -> bool:
    if ch.isascii():
        return ch.isalpha() or ch == "_" or ch == "$"
    return unicodedata.category(ch) in _START_CATEGORIES


def _is_ident_part(ch: str) -> bool:
    if ch.isascii():
        return ch.isalnum() or ch == "_" or ch == "$"
    return unicodedata.category(ch) in _PART_CATEGORIES


def selector_error(text: str, pos: int, detail: str) -> InvalidSelectorException:
    """Build the exception for a mistake at offset ``pos``, with a caret under it.

    Only the line containing ``pos`` is shown so multi-line selectors stay readable;
    tabs and other control characters are shown as spaces so the caret lines up.
    """
    pos = max(0, min(pos, len(text)))
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    if line_end == -1:
        line_end = len(text)
    line = "".join(c if c.isprintable() else " " for c in text[line_start:line_end])
    caret = " " * (pos - line_start) + "^"
    message = f"Invalid selector at position {pos}: {detail}\n  {line}\n  {caret}"
    return InvalidSelectorException(message, selector=text, position=pos)


def describe(token: Token) -> str:
    """Name a token for an error message: ``identifier 'qty'``, ``end of input`` ..."""
    if token.kind == EOF:
        return "end of input"
    if token.kind == STRING:
        return f"string {token.text}"
    if token.kind == NUMBER:
        return f"number {token.text}"
    if token.kind == BOOL:
        return f"boolean {token.text}"
    if token.kind == IDENT:
        return f"identifier '{token.text}'"
    if token.kind == KEYWORD:
        return f"keyword '{token.text}'"
    return f"'{token.text}'"


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, ending with an EOF token at ``len(text)``.

    Raises :class:`InvalidSelectorException` for characters that cannot start a token,
    unterminated strings and malformed numbers.
    """
    tokens: list[Token] = []
    n = len(text)
    i = 0
    while i < n:
        ch = text[i]
        if ch in _WHITESPACE:
            i += 1
        elif ch == "'":
            i = _read_string(text, i, tokens)
        elif ("0" <= ch <= "9") or (ch == "." and i + 1 < n and "0" <= text[i + 1] <= "9"):
            i = _read_number(text, i, tokens)
        elif _is_ident_start(ch):
            start = i
            i += 1
            while i < n and _is_ident_part(text[i]):
                i += 1
            word = text[start:i]
            upper = word.upper()
            if upper in KEYWORDS:
                if upper == "TRUE" or upper == "FALSE":
                    tokens.append(Token(BOOL, upper == "TRUE", start, word))
                else:
                    tokens.append(Token(KEYWORD, upper, start, word))
            else:
                tokens.append(Token(IDENT, word, start, word))
        elif text[i : i + 2] in _TWO_CHAR_OPS:
            tokens.append(Token(OP, text[i : i + 2], i, text[i : i + 2]))
            i += 2
        elif ch in _ONE_CHAR_OPS:
            tokens.append(Token(OP, ch, i, ch))
            i += 1
        else:
            hint = ""
            if ch == '"':
                hint = "; string literals use single quotes, e.g. 'EU'"
            elif ch == "!" and text[i : i + 2] == "!=":
                hint = "; use <> for 'not equal'"
            elif ch in "&|":
                hint = "; use AND / OR"
            raise selector_error(text, i, f"unexpected character {ch!r} (U+{ord(ch):04X}){hint}")
    tokens.append(Token(EOF, "", n, ""))
    return tokens


def _read_string(text: str, start: int, tokens: list[Token]) -> int:
    """Read a single-quoted literal at ``start``; ``''`` inside it is one quote."""
    parts: list[str] = []
    i = start + 1
    n = len(text)
    while True:
        end = text.find("'", i)
        if end == -1:
            raise selector_error(
                text,
                start,
                "unterminated string literal; close it with a single quote "
                "(write '' for a quote inside the string)",
            )
        parts.append(text[i:end])
        if end + 1 < n and text[end + 1] == "'":
            parts.append("'")
            i = end + 2
            continue
        tokens.append(Token(STRING, "".join(parts), start, text[start : end + 1]))
        return end + 1


def _digits(text: str, i: int) -> int:
    """Return the offset just past the ASCII digits starting at ``i``."""
    n = len(text)
    while i < n and "0" <= text[i] <= "9":
        i += 1
    return i


def _read_number(text: str, start: int, tokens: list[Token]) -> int:
    """Read ``57``, ``7.``, ``.5``, ``57.9E2``, ``1e-3``; anything glued on is an error.

    A number with a decimal point or an exponent is approximate (``float``), otherwise
    exact (``int``). Python ints are unbounded, so exact literals beyond Java's ``long``
    range are accepted rather than rejected.
    """
    n = len(text)
    i = _digits(text, start)
    is_float = False
    if i < n and text[i] == ".":
        is_float = True
        i = _digits(text, i + 1)
    if i < n and text[i] in "eE":
        j = i + 1
        if j < n and text[j] in "+-":
            j += 1
        k = _digits(text, j)
        if k == j:
            raise selector_error(
                text,
                start,
                f"malformed number {text[start:k]!r}: the exponent needs digits, e.g. 1.5E3",
            )
        is_float = True
        i = k
    if i < n and (_is_ident_part(text[i]) or text[i] == "."):
        end = i
        while end < n and (_is_ident_part(text[end]) or text[end] == "."):
            end += 1
        raise selector_error(
            text,
            start,
            f"malformed number {text[start:end]!r}; separate a number from a name with "
            "a space or an operator (hex, octal and type suffixes are not supported)",
        )
    literal = text[start:i]
    try:
        value: int | float = float(literal) if is_float else int(literal)
    except ValueError:  # more digits than Python's int-from-str limit (sys.set_int_max_str_digits)
        raise selector_error(
            text, start, f"the number {literal[:20]}... has too many digits"
        ) from None
    tokens.append(Token(NUMBER, value, start, literal))
    return i
