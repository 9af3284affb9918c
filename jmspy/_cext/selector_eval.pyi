"""Stub for the compiled twin built from cython_ext/selector_eval.pyx.

Same signatures as :mod:`jmspy._pure.selector_eval`; both satisfy
:class:`jmspy.selector.evaluate.SelectorEvalModule`.
"""

from collections.abc import Callable

from jmspy.selector.nodes import Node

__all__ = ["Predicate", "compile_predicate"]

class Predicate:
    def matches(self, get: Callable[[str], object]) -> bool: ...
    def evaluate(self, get: Callable[[str], object]) -> bool | None: ...

def compile_predicate(node: Node | None) -> Predicate: ...
