"""Chooses between the compiled modules (``jmspy._cext``) and their pure twins.

Every compiled module ``jmspy._cext.<name>`` has a pure-Python twin that satisfies the same
``typing.Protocol``: ``jmspy._pure.<name>``, or, for twins that belong to another layer,
the module :data:`PURE_MODULES` names beside that layer's code (the broker core's dispatch
loop and records, the vm transport's message conversion). ``JMSPY_PUREPYTHON=1`` (any
non-empty value other than ``0``) selects the pure twins. Otherwise the compiled modules
are *required*: an installation whose extensions did not build is broken, and we say so
instead of quietly running several times slower (msgpack-python's rule).

A module compiled from its own ``.py`` source (no ``.pyx``) was also a mechanism once:
nineteen of the broker's modules, retired because compiled they ran 1.00-1.08x end to
end, under the 1.10x a twin must show (benchmarks/README.md, the twin ledger).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
from collections.abc import Callable, Sequence
from types import ModuleType

__all__ = ["PURE_MODULES", "PURE_PYTHON", "PURE_TWINS", "is_extension", "load", "pure_module",
           "registry"]

_CHOICE = os.environ.get("JMSPY_PUREPYTHON", "")
#: the pure twins everywhere (``JMSPY_PUREPYTHON`` set, other than ``0``)
PURE_PYTHON: bool = _CHOICE not in ("", "0")
#: Twins run pure in a compiled build (``JMSPY_PURE_TWINS=name,name``): for measuring what
#: one compiled twin is worth, end to end (``python -m benchmarks.build_compare --without
#: NAME``), which the twin ledger in benchmarks/README.md keeps. Not a mode to run in.
PURE_TWINS: frozenset[str] = frozenset(
    name for name in os.environ.get("JMSPY_PURE_TWINS", "").split(",") if name)

#: Twins whose pure module lives with its layer rather than in ``jmspy._pure``.
PURE_MODULES: dict[str, str] = {
    "queue_run": "jmspy.broker_ref.core.queue_run",
    "records": "jmspy.broker_ref.core.records",
    "vm_convert": "jmspy.transports.vm_convert",
    "vm_send": "jmspy.transports.vm_send",
}


#: How to get the compiled modules: built from the source in use, never by a command that
#: fetches jmspy from a package index (that would replace this code with another release).
REBUILD = ("Build the compiled modules from this jmspy's source, with a C compiler and the "
           "Python headers installed (Debian: gcc, python3-dev): in its checkout, "
           "`pip install -e .` (again, if it is installed editable already), or "
           "`pip install .` and then run from another directory")

_EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def is_extension(module: ModuleType) -> bool:
    """True if ``module`` was loaded from a compiled extension."""
    return (getattr(module, "__file__", None) or "").endswith(_EXTENSION_SUFFIXES)


def pure_module(name: str) -> str:
    """The import name of twin ``name``'s pure module."""
    return PURE_MODULES.get(name, f"jmspy._pure.{name}")


def registry(namespace: dict[str, object], names: Sequence[str]
             ) -> Callable[[str], ModuleType]:
    """The ``__getattr__`` of a layer's twin registry (PEP 562): ``names`` are its twins,
    each loaded by :func:`load` when first named and kept in ``namespace``. Each layer
    has its own registry, typed on its own pure twins, so naming a twin never makes a
    layer depend on another's modules."""
    known = frozenset(names)

    def __getattr__(name: str) -> ModuleType:
        if name not in known:
            raise AttributeError(f"no twin {name!r} here; this layer's twins: "
                                 f"{', '.join(sorted(known))}")
        module = load(name)
        namespace[name] = module  # later lookups find it without this call
        return module

    return __getattr__


def load(name: str) -> ModuleType:
    """Return ``jmspy._cext.<name>``, or its pure twin under JMSPY_PUREPYTHON (or when
    :data:`PURE_TWINS` names it)."""
    if PURE_PYTHON or name in PURE_TWINS:
        return importlib.import_module(pure_module(name))
    try:
        return importlib.import_module(f"jmspy._cext.{name}")
    except ImportError as exc:
        raise ImportError(
            f"jmspy's compiled module jmspy._cext.{name} is not built ({exc}). "
            f"{REBUILD}, or set JMSPY_PUREPYTHON=1 to run the pure-Python twins."
        ) from exc
