"""The selector AST: small immutable nodes, plus the static kind of each.

Kept apart from the parser so the compiler (:mod:`jmspy.selector.evaluate`) depends on
the tree's shape only, not on how it was parsed.
"""

from __future__ import annotations

from dataclasses import dataclass

from jmspy.selector.like import LikePart

__all__ = [
    "Arith",
    "Between",
    "Compare",
    "Ident",
    "In",
    "IsNull",
    "Like",
    "Literal",
    "LiteralValue",
    "Logical",
    "Node",
    "Not",
    "Unary",
    "children",
    "describe_node",
    "kind_of",
]

LiteralValue = str | int | float | bool


@dataclass(frozen=True, slots=True)
class Literal:
    """A string, exact (int) or approximate (float) numeric, or boolean literal."""

    value: LiteralValue
    pos: int


@dataclass(frozen=True, slots=True)
class Ident:
    """A reference to a message header or property, resolved by the caller's getter."""

    name: str
    pos: int


@dataclass(frozen=True, slots=True)
class Unary:
    """Unary ``+`` or ``-`` on a numeric operand."""

    op: str
    operand: Node
    pos: int


@dataclass(frozen=True, slots=True)
class Arith:
    """Binary ``+ - * /``; ``pos`` is where the whole expression starts."""

    op: str
    left: Node
    right: Node
    pos: int


@dataclass(frozen=True, slots=True)
class Compare:
    """``= <> < <= > >=``."""

    op: str
    left: Node
    right: Node
    pos: int


@dataclass(frozen=True, slots=True)
class Not:
    """Logical negation in three-valued logic."""

    operand: Node
    pos: int


@dataclass(frozen=True, slots=True)
class Logical:
    """``AND`` / ``OR`` over two or more operands (chains are flattened)."""

    op: str
    operands: tuple[Node, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class Between:
    """``operand [NOT] BETWEEN low AND high``."""

    operand: Node
    low: Node
    high: Node
    negated: bool
    pos: int


@dataclass(frozen=True, slots=True)
class In:
    """``identifier [NOT] IN ('a', 'b', ...)``."""

    operand: Ident
    values: frozenset[str]
    negated: bool
    pos: int


@dataclass(frozen=True, slots=True)
class Like:
    """``identifier [NOT] LIKE 'pattern' [ESCAPE 'c']``, the pattern pre-split."""

    operand: Ident
    parts: tuple[LikePart, ...]
    negated: bool
    pos: int


@dataclass(frozen=True, slots=True)
class IsNull:
    """``identifier IS [NOT] NULL``; never UNKNOWN."""

    operand: Ident
    negated: bool
    pos: int


Node = Literal | Ident | Unary | Arith | Compare | Not | Logical | Between | In | Like | IsNull


def kind_of(node: Node) -> str:
    """Static kind of ``node``: ``"bool"``, ``"num"``, ``"str"`` or ``"any"``.

    Only identifiers are ``"any"``: their type is known only per message.
    """
    if isinstance(node, Literal):
        if isinstance(node.value, bool):
            return "bool"
        return "str" if isinstance(node.value, str) else "num"
    if isinstance(node, Ident):
        return "any"
    if isinstance(node, Unary | Arith):
        return "num"
    return "bool"


def describe_node(node: Node) -> str:
    """Describe an operand for an error message."""
    if isinstance(node, Literal):
        if isinstance(node.value, bool):
            return f"the boolean {'TRUE' if node.value else 'FALSE'}"
        if isinstance(node.value, str):
            return f"the string {node.value!r}"
        return f"the number {node.value!r}"
    if isinstance(node, Ident):
        return f"identifier '{node.name}'"
    if isinstance(node, Unary | Arith):
        return "an arithmetic expression"
    return "a boolean expression"


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of ``node``."""
    if isinstance(node, Literal | Ident):
        return ()
    if isinstance(node, Unary | Not | In | Like | IsNull):
        return (node.operand,)
    if isinstance(node, Arith | Compare):
        return (node.left, node.right)
    if isinstance(node, Logical):
        return node.operands
    return (node.operand, node.low, node.high)
