"""Chooses between the compiled modules (``jmspy._cext``) and their pure twins.

Every compiled module ``jmspy._cext.<name>`` has a pure-Python twin that satisfies the same
``typing.Protocol``: ``jmspy._pure.<name>``, or, for twins that belong to another layer,
the module :data:`PURE_MODULES` names beside that layer's code (the broker core's dispatch
loop and records, the vm transport's message conversion). ``JMSPY_PUREPYTHON=1`` (any
non-empty value other than ``0``) selects the pure twins. Otherwise the compiled modules
are *required*: an installation whose extensions did not build is broken, and we say so
instead of quietly running several times slower (msgpack-python's rule).

Some modules have no separate ``.pyx``: Cython compiles their own ``.py`` source
(:data:`COMPILED_SOURCES`, the broker's per-message path). There the source is the pure
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
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["COMPILED_SOURCES", "PURE_MODULES", "PURE_PYTHON", "PURE_SOURCES",
           "SourceBuildFinder", "install_finder", "is_extension", "load", "pure_module"]

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


#: Modules Cython compiles from their own ``.py`` (``setup.py`` reads this tuple): the
#: code a message passes through in the broker, from the socket's bytes to the frames
#: written back, and to the disk for a persistent one. Plain Python compiled as it is, so
#: it keeps Python's semantics; what it saves is the interpreter's work per call and per
#: attribute (``python -m benchmarks.cpu_split --brokers jmspy-uvloop,jmspy-interpreted``
#: measures it; figures in benchmarks/README.md). The test suite runs on both builds,
#: like every twin.
COMPILED_SOURCES: tuple[str, ...] = (
    "jmspy.stomp_frames",
    "jmspy.stomp_jms_header",
    "jmspy.broker_ref.core.broker",
    "jmspy.broker_ref.core.connection",
    "jmspy.broker_ref.core.message_codec",
    "jmspy.broker_ref.core.postoffice",
    "jmspy.broker_ref.core.producer_flow",
    "jmspy.broker_ref.core.queue",
    "jmspy.broker_ref.core.queue_deliveries",
    "jmspy.broker_ref.core.queue_removals",
    "jmspy.broker_ref.core.sqlite_store",
    "jmspy.broker_ref.protocols.stomp.credit",
    "jmspy.broker_ref.protocols.stomp.destinations",
    "jmspy.broker_ref.protocols.stomp.held",
    "jmspy.broker_ref.protocols.stomp.loop_polling",
    "jmspy.broker_ref.protocols.stomp.mapping",
    "jmspy.broker_ref.protocols.stomp.protocol",
    "jmspy.broker_ref.protocols.stomp.server",
    "jmspy.broker_ref.protocols.stomp.subscription",
)

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
                "Reinstall jmspy with a C compiler and Cython available "
                "(`pip install --force-reinstall jmspy`), or set JMSPY_PUREPYTHON=1 to run "
                "the pure-Python source.", name=fullname)
        return spec


def install_finder() -> None:
    """Put the :class:`SourceBuildFinder` first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, SourceBuildFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceBuildFinder(COMPILED_SOURCES, PURE_SOURCES))


install_finder()


def pure_module(name: str) -> str:
    """The import name of twin ``name``'s pure module."""
    return PURE_MODULES.get(name, f"jmspy._pure.{name}")


def load(name: str) -> ModuleType:
    """Return ``jmspy._cext.<name>``, or its pure twin under JMSPY_PUREPYTHON."""
    if PURE_PYTHON:
        return importlib.import_module(pure_module(name))
    try:
        return importlib.import_module(f"jmspy._cext.{name}")
    except ImportError as exc:
        raise ImportError(
            f"jmspy's compiled module jmspy._cext.{name} is not built ({exc}). "
            "Reinstall jmspy with a C compiler and Cython available "
            "(`pip install --force-reinstall jmspy`), or set JMSPY_PUREPYTHON=1 to run "
            "the pure-Python twins."
        ) from exc
