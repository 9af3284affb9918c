"""Chooses between the compiled modules (``jmspy._cext``) and their pure twins.

Every compiled module ``jmspy._cext.<name>`` has a pure-Python twin that satisfies the same
``typing.Protocol``: ``jmspy._pure.<name>``, or, for twins that belong to another layer,
the module :data:`PURE_MODULES` names beside that layer's code (the broker core's dispatch
loop and records, the vm transport's message conversion). ``JMSPY_PUREPYTHON=1`` (any
non-empty value other than ``0``) selects the pure twins. Otherwise the compiled modules
are *required*: an installation whose extensions did not build is broken, and we say so
instead of quietly running several times slower (msgpack-python's rule).

A module may also have no separate ``.pyx``: Cython can compile its own ``.py`` source
(:data:`COMPILED_SOURCES`, empty at present: see there why). There the source is the pure
twin, and the extension sits beside it under the same name, which Python's import system
would always prefer. :class:`SourceBuildFinder` (on ``sys.meta_path`` once ``jmspy`` is
imported) chooses by the same rule as :func:`load`: the ``.py`` under ``JMSPY_PUREPYTHON``,
else the extension, which is then required. ``JMSPY_PUREPYTHON=sources`` interprets only
these (every ``jmspy._cext`` twin stays compiled): what compiling them is worth, measured
by ``python -m benchmarks.cpu_split --brokers jmspy-uvloop,jmspy-interpreted``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["COMPILED_SOURCES", "PURE_MODULES", "PURE_PYTHON", "PURE_SOURCES",
           "SourceBuildFinder", "install_finder", "is_extension", "load", "pure_module",
           "registry"]

_CHOICE = os.environ.get("JMSPY_PUREPYTHON", "")
#: the pure twins everywhere (``JMSPY_PUREPYTHON`` set, other than ``0`` or ``sources``)
PURE_PYTHON: bool = _CHOICE not in ("", "0", "sources")
#: the :data:`COMPILED_SOURCES` modules interpreted (every pure mode, and ``sources``)
PURE_SOURCES: bool = PURE_PYTHON or _CHOICE == "sources"

#: Twins whose pure module lives with its layer rather than in ``jmspy._pure``.
PURE_MODULES: dict[str, str] = {
    "consumer_core": "jmspy.consumer_core",
    "page_rows": "jmspy.broker_ref.core.page_rows",
    "queue_run": "jmspy.broker_ref.core.queue_run",
    "records": "jmspy.broker_ref.core.records",
    "stomp_message": "jmspy.broker_ref.protocols.stomp.message_frame",
    "stomp_received": "jmspy.transports.stomp.received",
    "stomp_send": "jmspy.broker_ref.protocols.stomp.send_path",
    "vm_convert": "jmspy.transports.vm_convert",
    "vm_send": "jmspy.transports.vm_send",
}


#: Modules Cython compiles from their own ``.py`` (``setup.py`` reads this tuple): plain
#: Python compiled as it is, so it keeps Python's semantics and the ``.py`` is its pure
#: twin; what it can save is the interpreter's work per call and per attribute. Empty:
#: the broker's per-message modules (the STOMP session, its credit and subscriptions, the
#: host's connection callbacks, the broker core's queue and deliveries, the frame
#: helpers; nineteen modules) were compiled this way and did not pay their way. Compiled
#: against interpreted (benchmarks/README.md, "Where a broker row's time goes"): receipt
#: ``ack:auto`` 1.08x, ``ack:client`` 1.00x, window 1 1.03x, ``vm://`` end to end 1.00x,
#: where a twin must show 1.10x end to end;
#: they made 18 of the build's 30 MB of C, 77 of its 120 CPU-seconds and 3.2 of its 5 MB
#: of extensions. A module comes back here only with a measurement that shows it paying
#: (``python -m benchmarks.cpu_split --brokers jmspy-uvloop,jmspy-interpreted``).
COMPILED_SOURCES: tuple[str, ...] = ()

#: How to get the compiled modules: built from the source in use, never by a command that
#: fetches jmspy from a package index (that would replace this code with another release).
REBUILD = ("Build the compiled modules from this jmspy's source, with a C compiler and the "
           "Python headers installed (Debian: gcc, python3-dev): in its checkout, "
           "`pip install -e .` (again, if it is installed editable already), or "
           "`pip install .` and then run from another directory")

_EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def _built(path: str) -> bool:
    return path.endswith(_EXTENSION_SUFFIXES)


def is_extension(module: ModuleType) -> bool:
    """True if ``module`` was loaded from a compiled extension."""
    return _built(getattr(module, "__file__", None) or "")


class SourceBuildFinder(importlib.abc.MetaPathFinder):
    """Finds a :data:`COMPILED_SOURCES` module the way the other finders would, then
    keeps the build the mode asks for (see the module docstring)."""

    def __init__(self, names: Sequence[str], pure: bool) -> None:
        self._names = frozenset(names)
        self._pure = pure

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._names:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if isinstance(finder, SourceBuildFinder) or find is None:  # self too
                continue
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
            if spec is not None:
                return self.choose(fullname, spec)
        return None

    def choose(
        self, fullname: str, spec: importlib.machinery.ModuleSpec
    ) -> importlib.machinery.ModuleSpec:
        """``spec`` itself, or the spec of the build this mode requires."""
        origin = spec.origin or ""
        compiled = _built(origin)
        if compiled and self._pure:
            source = Path(origin).with_name(fullname.rpartition(".")[2] + ".py")
            pure = importlib.util.spec_from_file_location(fullname, source)
            if pure is None or not source.is_file():
                raise ImportError(f"the pure-Python source of {fullname} is missing "
                                  f"({source}); reinstall jmspy", name=fullname)
            return pure
        if not compiled and not self._pure:
            raise ImportError(
                f"jmspy's compiled module {fullname} is not built (found only {origin}). "
                f"{REBUILD}, or set JMSPY_PUREPYTHON=1 to run the pure-Python source.",
                name=fullname)
        return spec


def install_finder() -> None:
    """Put the :class:`SourceBuildFinder` first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, SourceBuildFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceBuildFinder(COMPILED_SOURCES, PURE_SOURCES))


install_finder()


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
    """Return ``jmspy._cext.<name>``, or its pure twin under JMSPY_PUREPYTHON."""
    if PURE_PYTHON:
        return importlib.import_module(pure_module(name))
    try:
        return importlib.import_module(f"jmspy._cext.{name}")
    except ImportError as exc:
        raise ImportError(
            f"jmspy's compiled module jmspy._cext.{name} is not built ({exc}). "
            f"{REBUILD}, or set JMSPY_PUREPYTHON=1 to run the pure-Python twins."
        ) from exc
