"""Chooses between the compiled modules (``jmspy._cext``) and their pure twins.

Every compiled module has a pure-Python twin of the same name in ``jmspy._pure`` that
satisfies the same ``typing.Protocol``. ``JMSPY_PUREPYTHON=1`` (any non-empty value other
than ``0``) selects the pure twins. Otherwise the compiled modules are *required*: an
installation whose extensions did not build is broken, and we say so instead of quietly
running several times slower (msgpack-python's rule).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["PURE_PYTHON", "load"]

PURE_PYTHON: bool = os.environ.get("JMSPY_PUREPYTHON", "") not in ("", "0")


def load(name: str) -> ModuleType:
    """Return ``jmspy._cext.<name>``, or ``jmspy._pure.<name>`` under JMSPY_PUREPYTHON."""
    if PURE_PYTHON:
        return importlib.import_module(f"jmspy._pure.{name}")
    try:
        return importlib.import_module(f"jmspy._cext.{name}")
    except ImportError as exc:
        raise ImportError(
            f"jmspy's compiled module jmspy._cext.{name} is not built ({exc}). "
            "Reinstall jmspy with a C compiler and Cython available "
            "(`pip install --force-reinstall jmspy`), or set JMSPY_PUREPYTHON=1 to run "
            "the pure-Python twins."
        ) from exc
