"""``python -m build --sdist`` makes a source distribution that holds what the build needs
(the Cython, stub and Python sources, the build files) and no build products.

The sdist is built from a copy of the checkout into which built files were planted, as an
in-place build leaves them: they must stay out. Making an sdist runs no compiler and no
Cython (setup.py cythonizes only when extensions are built).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Folders whose files an sdist never needs (environments, caches, results).
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".tox", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache",
    ".ruff_cache", ".pytest_cache", ".hypothesis", "results", "jmspy-data")
#: the broker's web console: HTML that is a source (Cython's annotations are not)
CONSOLE = "broker_ref/http/console/"
#: Build products planted in the copy, where in-place builds leave them.
PLANTED = ("jmspy/_cext/records.cpython-311-x86_64-linux-gnu.so", "cython_ext/records.c",
           "cython_ext/records.html", "broker_ref/core/queue.c",
           "broker_ref/core/queue.cpython-311-x86_64-linux-gnu.so", "jmspy/stomp_frames.c")


def _sources(root: Path, folder: str, pattern: str) -> set[str]:
    return {str(p.relative_to(root)) for p in (root / folder).rglob(pattern)
            if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    if importlib.util.find_spec("build") is None:
        pytest.fail("the `build` package is missing: pip install -e '.[test]'")
    tmp = tmp_path_factory.mktemp("sdist")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCES)
    for planted in PLANTED:
        (src / planted).write_bytes(b"\x7fELF built, not a source")
    run = subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir",
                          str(tmp / "dist"), str(src)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (archive,) = (tmp / "dist").glob("jmspy-*.tar.gz")
    with tarfile.open(archive) as tar:
        names = {str(PurePosixPath(*PurePosixPath(m.name).parts[1:]))
                 for m in tar.getmembers() if m.isfile()}
    return src, names


def test_the_sdist_holds_every_source_the_build_reads(sdist: tuple[Path, set[str]]) -> None:
    src, names = sdist
    needed = {"setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE",
              "CHANGELOG.md"}
    needed |= _sources(src, "cython_ext", "*.pyx") | _sources(src, "cython_ext", "*.pxi")
    needed |= _sources(src, "jmspy/_cext", "*.pxd") | _sources(src, "jmspy/_cext", "*.pyi")
    needed |= {"jmspy/py.typed"}
    for folder in ("jmspy", "transports", "broker_ref"):
        needed |= _sources(src, folder, "*.py")
    assert len(needed) > 100 and {"cython_ext/stomp_codec.pyx", "jmspy/_cext/records.pxd"} <= needed
    assert needed - names == set()


def test_the_sdist_holds_no_build_products(sdist: tuple[Path, set[str]]) -> None:
    _, names = sdist
    built = {n for n in names if n.endswith((".c", ".so", ".pyd", ".html", ".pyc", ".o"))
             and not n.startswith(CONSOLE)}
    assert built == set()
    assert not set(PLANTED) & names


def test_the_sdist_holds_the_web_console(sdist: tuple[Path, set[str]]) -> None:
    """The broker's console is static HTML, CSS and JavaScript: sources, not products."""
    _, names = sdist
    assert {f"{CONSOLE}{f}" for f in ("index.html", "console.js", "console.css")} <= names
