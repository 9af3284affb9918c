"""Chooses between the compiled modules (``jmspy._cext``) and their pure twins.

Every compiled module ``jmspy._cext.<name>`` has a pure-Python twin that satisfies the same
``typing.Protocol``: ``jmspy._pure.<name>``, or, for twins that belong to another layer,
the module :data:`PURE_MODULES` names beside that layer's code (the broker core's dispatch
loop and records, the vm transport's message conversion). ``JMSPY_PUREPYTHON=1`` (any
non-empty value other than ``0``) selects the pure twins. Otherwise the compiled modules
are *required*: an installation whose extensions did not build is broken, and we say so
instead of quietly running several times slower (msgpack-python's rule).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["PURE_MODULES", "PURE_PYTHON", "load", "pure_module"]

PURE_PYTHON: bool = os.environ.get("JMSPY_PUREPYTHON", "") not in ("", "0")

#: Twins whose pure module lives with its layer rather than in ``jmspy._pure``.
PURE_MODULES: dict[str, str] = {
    "consumer_core": "jmspy.consumer_core",
    "page_rows": "jmspy.broker_ref.core.page_rows",
    "queue_run": "jmspy.broker_ref.core.queue_run",
    "records": "jmspy.broker_ref.core.records",
    "stomp_received": "jmspy.transports.stomp.received",
    "stomp_send": "jmspy.broker_ref.protocols.stomp.send_path",
    "vm_convert": "jmspy.transports.vm_convert",
    "vm_send": "jmspy.transports.vm_send",
}


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
