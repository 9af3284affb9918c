"""Recursive-descent parser for JMS message selectors, producing a small typed AST.

Grammar (JMS 2.0 section 3.8.1.1; precedence low to high)::

    selector   := [ or_expr ] EOF
    or_expr    := and_expr { OR and_expr }
    and_expr   := not_expr { AND not_expr }
    not_expr   := NOT not_expr | predicate
    predicate  := sum [ cmp_op sum
                      | [NOT] BETWEEN sum AND sum
                      | [NOT] IN '(' string { ',' string } ')'
                      | [NOT] LIKE string [ ESCAPE string ]
                      | IS [NOT] NULL ]
    sum        := product { ('+' | '-') product }
    product    := unary { ('*' | '/') unary }
    unary      := ('+' | '-') unary | primary
    primary    := string | number | TRUE | FALSE | identifier | '(' or_expr ')'

The parser also does the static checks the spec allows us to make at compile time, so
that a selector that can never work fails when the consumer is created, not silently on
every message: operand kinds of AND/OR/NOT, arithmetic and ordering comparisons, IN
lists of string literals only, LIKE escapes, and a boolean result at the top level.
Comparisons do not chain (``a = b = c`` is rejected); parenthesize to compare booleans.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Final, NoReturn

from jmspy.selector.lexer import (
    BOOL,
    EOF,
    IDENT,
    KEYWORD,
    NUMBER,
    OP,
    STRING,
    Token,
    describe,
    selector_error,
    tokenize,
)
from jmspy.selector.like import split_like_pattern
from jmspy.selector.nodes import (
    Arith,
    Between,
    Compare,
    Ident,
    In,
    IsNull,
    Like,
    Literal,
    Logical,
    Node,
    Not,
    Unary,
    children,
    kind_of,
)
from jmspy.selector.nodes import describe_node as _what

__all__ = ["MAX_NESTING", "MAX_TREE_DEPTH", "parse"]

#: Deepest nesting of parentheses / NOT / unary signs accepted. It keeps both this
#: recursive parser and the nested closures built from the tree far from Python's
#: recursion limit; real selectors nest a handful of levels at most.
MAX_NESTING: Final = 64

#: Deepest AST accepted. Long left-deep chains such as ``a + a + a ...`` grow the tree
#: without recursing in the parser, but compiling and evaluating them does recurse.
MAX_TREE_DEPTH: Final = 256

_COMPARISON_OPS: Final = frozenset({"=", "<>", "<", "<=", ">", ">="})
_ORDERING_OPS: Final = frozenset({"<", "<=", ">", ">="})


def _deepest_node(root: Node) -> Node | None:
    """The first node found deeper than MAX_TREE_DEPTH, or None (iterative, no recursion)."""
    stack: list[tuple[Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            return node
        stack.extend((child, depth + 1) for child in children(node))
    return None


class _Parser:
    """Single-use parser over one token list; see the module docstring for the grammar."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0
        # The binary levels of the grammar, loosest first: one generic method per kind of
        # level, bound to its operators with ``partial``, which adds no frame of its own,
        # so nesting recurses no deeper than with a method per level.
        self.or_expr: Callable[[], Node] = partial(
            self.logical, "OR", partial(self.logical, "AND", self.not_expr))
        self.sum: Callable[[], Node] = partial(
            self.left_assoc, "+", "-", partial(self.left_assoc, "*", "/", self.unary))

    # -- token helpers -------------------------------------------------------------------

    def peek(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind != EOF:
            self.i += 1
        return tok

    def at_keyword(self, word: str) -> bool:
        tok = self.tokens[self.i]
        return tok.kind == KEYWORD and tok.value == word

    def at_op(self, op: str) -> bool:
        tok = self.tokens[self.i]
        return tok.kind == OP and tok.value == op

    def fail(self, pos: int, detail: str) -> NoReturn:
        raise selector_error(self.text, pos, detail)

    def after(self) -> str:
        """`` after 'X'`` naming the previous token, for "expected ..." messages."""
        if self.i == 0:
            return ""
        return f" after '{self.tokens[self.i - 1].text}'"

    def nest(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.fail(pos, f"the selector nests more than {MAX_NESTING} levels deep")

    # -- grammar ---------------------------------------------------------------------------

    def parse(self) -> Node | None:
        if self.peek().kind == EOF:
            return None
        node = self.or_expr()
        tok = self.peek()
        if tok.kind != EOF:
            if tok.kind == OP and tok.value == ")":
                self.fail(tok.pos, "unexpected ')' without a matching '('")
            self.fail(
                tok.pos,
                f"expected AND, OR, an operator or end of input, found {describe(tok)}",
            )
        deepest = _deepest_node(node)
        if deepest is not None:
            self.fail(deepest.pos, f"the selector nests more than {MAX_TREE_DEPTH} levels deep")
        if kind_of(node) not in ("bool", "any"):
            self.fail(
                node.pos,
                f"a selector must be a boolean expression (a comparison, LIKE, IN, BETWEEN, "
                f"IS NULL, TRUE/FALSE or a boolean property), found {_what(node)}",
            )
        return node

    def boolean_operand(self, node: Node, op: str) -> Node:
        if kind_of(node) not in ("bool", "any"):
            self.fail(node.pos, f"{op} needs boolean operands, found {_what(node)}")
        return node

    def logical(self, keyword: str, operand: Callable[[], Node]) -> Node:
        """``operand (keyword operand)*`` as one flat ``Logical`` (or the lone operand),
        every operand checked boolean; ``operand`` is the next tighter level."""
        first = operand()
        if not self.at_keyword(keyword):
            return first
        operands = [self.boolean_operand(first, keyword)]
        while self.at_keyword(keyword):
            self.advance()
            operands.append(self.boolean_operand(operand(), keyword))
        return Logical(keyword, tuple(operands), first.pos)

    def not_expr(self) -> Node:
        if self.at_keyword("NOT"):
            tok = self.advance()
            self.nest(tok.pos)
            operand = self.boolean_operand(self.not_expr(), "NOT")
            self.depth -= 1
            return Not(operand, tok.pos)
        return self.predicate()

    def predicate(self) -> Node:
        left = self.sum()
        node = self.predicate_tail(left)
        if node is not left:
            tok = self.peek()
            if (tok.kind == OP and tok.value in _COMPARISON_OPS) or (
                tok.kind == KEYWORD and tok.value in ("BETWEEN", "IN", "LIKE", "IS")
            ):
                self.fail(
                    tok.pos,
                    f"comparisons cannot be chained, found {describe(tok)} after a "
                    "comparison; combine conditions with AND / OR, or parenthesize",
                )
        return node

    def predicate_tail(self, left: Node) -> Node:
        tok = self.peek()
        if tok.kind == OP and tok.value in _COMPARISON_OPS:
            self.advance()
            right = self.sum()
            op = str(tok.value)
            if op in _ORDERING_OPS:
                for side in (left, right):
                    if kind_of(side) not in ("num", "any"):
                        self.fail(
                            side.pos,
                            f"'{op}' compares numbers only, found {_what(side)}; "
                            "strings and booleans support only = and <>",
                        )
            return Compare(op, left, right, left.pos)
        if tok.kind != KEYWORD:
            return left
        negated = False
        if tok.value == "NOT":
            nxt = self.tokens[self.i + 1]
            if nxt.kind == KEYWORD and nxt.value in ("BETWEEN", "IN", "LIKE"):
                self.advance()
                negated = True
                tok = nxt
            else:
                self.advance()
                self.fail(nxt.pos, f"expected BETWEEN, IN or LIKE after NOT, found {describe(nxt)}")
        if tok.value == "BETWEEN":
            self.advance()
            return self.between_tail(left, negated)
        if tok.value == "IN":
            self.advance()
            return self.in_tail(self.identifier_operand(left, "IN"), negated)
        if tok.value == "LIKE":
            self.advance()
            return self.like_tail(self.identifier_operand(left, "LIKE"), negated)
        if tok.value == "IS":
            self.advance()
            ident = self.identifier_operand(left, "IS NULL")
            is_not = self.at_keyword("NOT")
            if is_not:
                self.advance()
            if not self.at_keyword("NULL"):
                wanted = "NULL" if is_not else "NULL or NOT NULL"
                self.fail(
                    self.peek().pos,
                    f"expected {wanted}{self.after()}, found {describe(self.peek())}",
                )
            self.advance()
            return IsNull(ident, is_not, left.pos)
        return left

    def identifier_operand(self, left: Node, op: str) -> Ident:
        if not isinstance(left, Ident):
            self.fail(left.pos, f"{op} needs an identifier on its left, found {_what(left)}")
        return left

    def numeric_operand(self, node: Node, op: str) -> Node:
        if kind_of(node) not in ("num", "any"):
            self.fail(node.pos, f"{op} needs numeric operands, found {_what(node)}")
        return node

    def between_tail(self, left: Node, negated: bool) -> Node:
        self.numeric_operand(left, "BETWEEN")
        low = self.numeric_operand(self.sum(), "BETWEEN")
        if not self.at_keyword("AND"):
            tok = self.peek()
            self.fail(tok.pos, f"expected AND in 'BETWEEN ... AND ...', found {describe(tok)}")
        self.advance()
        high = self.numeric_operand(self.sum(), "BETWEEN")
        return Between(left, low, high, negated, left.pos)

    def in_tail(self, ident: Ident, negated: bool) -> Node:
        if not self.at_op("("):
            tok = self.peek()
            self.fail(tok.pos, f"expected '(' after IN, found {describe(tok)}")
        open_tok = self.advance()
        values: set[str] = set()
        while True:
            tok = self.peek()
            if tok.kind != STRING:
                detail = "IN list items must be string literals"
                if tok.kind == EOF or (tok.kind == OP and tok.value == ")"):
                    detail = "expected a string literal in the IN list"
                self.fail(tok.pos, f"{detail}, found {describe(tok)}")
            self.advance()
            values.add(str(tok.value))
            sep = self.peek()
            if sep.kind == OP and sep.value == ",":
                self.advance()
                continue
            if sep.kind == OP and sep.value == ")":
                self.advance()
                return In(ident, frozenset(values), negated, ident.pos)
            self.fail(
                sep.pos,
                f"expected ',' or ')' to continue the IN list opened at position "
                f"{open_tok.pos}, found {describe(sep)}",
            )

    def like_tail(self, ident: Ident, negated: bool) -> Node:
        pattern = self.peek()
        if pattern.kind != STRING:
            self.fail(
                pattern.pos,
                f"expected a string literal pattern after LIKE, found {describe(pattern)}",
            )
        self.advance()
        escape: str | None = None
        if self.at_keyword("ESCAPE"):
            self.advance()
            esc = self.peek()
            if esc.kind != STRING:
                self.fail(esc.pos, f"expected a string literal after ESCAPE, found {describe(esc)}")
            self.advance()
            escape = str(esc.value)
            if len(escape) != 1:
                self.fail(
                    esc.pos,
                    f"the ESCAPE character must be exactly one character, found {esc.text}",
                )
        parts = split_like_pattern(str(pattern.value), escape)
        if isinstance(parts, str):
            self.fail(pattern.pos, parts)
        return Like(ident, parts, negated, ident.pos)

    def left_assoc(self, op1: str, op2: str, operand: Callable[[], Node]) -> Node:
        """``operand (op operand)*`` for one precedence level of binary arithmetic,
        grouped to the left (``a - b - c`` is ``(a - b) - c``); each level names its two
        operators and the next tighter level."""
        left = operand()
        while self.at_op(op1) or self.at_op(op2):
            op = str(self.advance().value)
            right = operand()
            left = Arith(
                op,
                self.numeric_operand(left, f"'{op}'"),
                self.numeric_operand(right, f"'{op}'"),
                left.pos,
            )
        return left

    def unary(self) -> Node:
        if self.at_op("+") or self.at_op("-"):
            tok = self.advance()
            self.nest(tok.pos)
            operand = self.numeric_operand(self.unary(), f"unary '{tok.value}'")
            self.depth -= 1
            if isinstance(operand, Literal) and not isinstance(operand.value, str | bool):
                # Fold signed literals so "-957" is one constant, as the spec reads it.
                value = -operand.value if tok.value == "-" else operand.value
                return Literal(value, tok.pos)
            return Unary(str(tok.value), operand, tok.pos)
        return self.primary()

    def primary(self) -> Node:
        tok = self.peek()
        if tok.kind in (STRING, NUMBER, BOOL):
            self.advance()
            return Literal(tok.value, tok.pos)
        if tok.kind == IDENT:
            self.advance()
            return Ident(str(tok.value), tok.pos)
        if tok.kind == OP and tok.value == "(":
            self.advance()
            self.nest(tok.pos)
            inner = self.or_expr()
            self.depth -= 1
            close = self.peek()
            if not (close.kind == OP and close.value == ")"):
                self.fail(
                    close.pos,
                    f"expected ')' to close the '(' at position {tok.pos}, found {describe(close)}",
                )
            self.advance()
            return inner
        if tok.kind == KEYWORD and tok.value == "NULL":
            self.fail(
                tok.pos,
                "NULL is not a value here; test for a missing value with "
                "'identifier IS NULL' or 'identifier IS NOT NULL'",
            )
        detail = f"expected a value{self.after()}, found {describe(tok)}"
        if tok.kind == KEYWORD:
            detail += f" ('{tok.text}' is a reserved word and cannot be used as an identifier)"
        self.fail(tok.pos, detail)


def parse(text: str) -> Node | None:
    """Parse ``text``; ``None`` means an empty (match-everything) selector.

    Raises :class:`~jmspy.errors.InvalidSelectorException` with the offending position.
    """
    return _Parser(text).parse()
