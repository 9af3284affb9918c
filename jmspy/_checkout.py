"""Stops ``import jmspy`` of a source checkout's ``jmspy/`` folder, saying why and what to do.

In a checkout, ``jmspy/`` holds only the client core. ``jmspy.transports`` and
``jmspy.broker_ref`` live in the sibling folders ``transports/`` and ``broker_ref/`` and
join the package only when it is installed (``package-dir`` in pyproject.toml), and the
compiled modules are built only by the install. Python puts the current directory first
on ``sys.path`` for the REPL, ``python -c`` and ``python -m``, and a script's own
directory for a script. So in the checkout's root this folder shadows the installed
jmspy, and without this check the import failed later, on a missing compiled module,
with a hint that did not name the cause.

``jmspy/__init__.py`` imports this module first; importing it runs the check.
An editable install (``pip install -e .``) maps the sibling folders into the package, so
there the folder *is* the package and nothing is refused. Otherwise the import raises
:class:`ImportError` naming the folder, the installed copy if there is one, and the fixes:
run from another directory (or ``python -P``, which leaves the current directory off
``sys.path``), or install the checkout editable.

Why refuse rather than rescue. Two rescues were weighed and rejected:

* Extending ``__path__`` with the sibling folders makes the subpackages importable, but
  the compiled modules are still missing. A compiled run never falls back to the pure
  twins unasked, so outside ``JMSPY_PUREPYTHON`` it fails anyway, and under it it runs
  code that is neither the installed package nor a build of this folder.
* Loading the installed copy in this folder's place runs code other than the files in
  front of the user: edits to the checkout would silently have no effect.

One sentence with the reason and the fix costs the user less than either surprise.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["refuse_unmapped_checkout"]


def _checkout_root(package_dir: Path) -> Path | None:
    """The checkout ``package_dir`` sits in, or None when it is an installed package.

    An installed jmspy holds ``broker_ref/`` inside the package; a checkout holds it beside
    ``jmspy/``, next to the project's pyproject.toml."""
    root = package_dir.parent
    if (package_dir / "broker_ref").is_dir():
        return None
    if (root / "pyproject.toml").is_file() and (root / "broker_ref" / "__init__.py").is_file():
        return root
    return None


def _mapped_here(root: Path) -> bool:
    """True when ``jmspy.broker_ref`` resolves to this checkout's own ``broker_ref/``
    (an editable install of this checkout)."""
    try:
        spec = importlib.util.find_spec("jmspy.broker_ref")
    except (ImportError, ValueError):
        return False
    if spec is None or spec.origin is None:
        return False
    return Path(spec.origin).resolve().parent == (root / "broker_ref").resolve()


def _installed_copy(root: Path) -> Path | None:
    """The package directory of the jmspy that would be imported if ``root`` were not on
    ``sys.path``: a regular install (also into a virtualenv inside the checkout, as the
    README's ``.venv`` is), or an editable install of another checkout."""
    source = (root / "jmspy").resolve()

    def outside(place: Path) -> bool:
        return place != source

    entries = [entry for entry in sys.path if Path(entry or os.getcwd()).resolve() != root]
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        path = entries if finder is importlib.machinery.PathFinder else None
        try:
            spec = find("jmspy", path)
        except (ImportError, ValueError):
            continue
        if spec is None or spec.origin is None:
            continue
        found = Path(spec.origin).resolve().parent
        if outside(found):
            return found
    return None


def message(package_dir: Path, root: Path, installed: Path | None) -> str:
    """The ImportError's text: what was imported, why it cannot work, and the fixes."""
    why = (f"`import jmspy` found {package_dir}, the source folder of the jmspy checkout at "
           f"{root}, because Python puts the current directory (or a script's) first on "
           "sys.path. That folder is not the package: jmspy.transports and jmspy.broker_ref "
           f"live in {root / 'transports'} and {root / 'broker_ref'} and join it only when "
           "jmspy is installed, and its compiled modules are built only by the install.")
    editable = f"`pip install -e {root}` (an editable install: runs the checkout's code)"
    if installed is not None:
        return (f"{why} The installed jmspy is {installed}. To use it, run from another "
                "directory (`cd` out of the checkout), or start Python with -P (`python -P "
                f"-m jmspy ...` leaves the current directory off sys.path); or {editable}.")
    return (f"{why} No installed jmspy was found for {sys.executable}. Install this "
            f"checkout, `pip install {root}`, and run from another directory; or {editable}.")


def refuse_unmapped_checkout(package_dir: Path) -> None:
    """Raise :class:`ImportError` if ``package_dir`` is a checkout's source folder that no
    install maps its subpackages into."""
    root = _checkout_root(package_dir)
    if root is None or _mapped_here(root):
        return
    raise ImportError(message(package_dir, root, _installed_copy(root)), name="jmspy")


# On import, first thing in jmspy/__init__.py: the folder this module sits in.
refuse_unmapped_checkout(Path(__file__).resolve().parent)
