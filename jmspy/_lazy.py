"""Package façades that load a public name's module when the name is first used (PEP 562).

Why: a package ``__init__`` that imports its public names eagerly makes every module of
the package depend on all of it -- importing ``jmspy.wire`` would load the client, and a
module deep in the broker core importing a sibling would run the core's ``__init__``,
which imports that module's own callers: import cycles that only import order held
together. A façade keeps ``from package import Name`` working (and typed, through an
``if TYPE_CHECKING:`` block of the same imports) while the package itself imports
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["facade"]


def facade(package: str, namespace: dict[str, Any], public: Mapping[str, str]
           ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose globals are ``namespace``:
    ``public`` maps each public name to the submodule (relative to ``package``) that
    defines it, or to a module of a sibling package by a relative name
    (``..store.store``). A name, once loaded, is stored in ``namespace``, so later lookups
    do not come back here."""

    def __getattr__(name: str) -> Any:
        module = public.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # a name defined in a sibling package is given relative to this one ("..store.x")
        found = (import_module(module, package) if module.startswith(".")
                 else import_module(f"{package}.{module}"))
        value = getattr(found, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *public})

    return __getattr__, __dir__
