"""Builds the Cython twins in cython_ext/ as jmspy._cext.<name>, and compiles the modules
``jmspy/_speedups.py`` lists in COMPILED_SOURCES from their own .py source, in place
(their pure twin is that source).

A compile error fails the build: there is no silent fallback to pure Python at install
time (set JMSPY_PUREPYTHON=1 at run time to choose the pure twins deliberately).
JMSPY_CYTHON_ANNOTATE=1 writes Cython's HTML annotation next to each .pyx;
JMSPY_CYTHON_TRACE=1 compiles with line tracing for profilers.
"""

from __future__ import annotations

import ast
import os
import tomllib
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
TRACE = os.environ.get("JMSPY_CYTHON_TRACE") == "1"

extensions = [
    Extension(
        f"jmspy._cext.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        define_macros=[("CYTHON_TRACE_NOGIL", "1")] if TRACE else [],
    )
    for pyx in sorted((HERE / "cython_ext").glob("*.pyx"))
]

#: Where each package's sources live: pyproject's [tool.setuptools] package-dir, read here
#: so the two cannot disagree.
PACKAGE_DIRS: dict[str, str] = tomllib.loads((HERE / "pyproject.toml").read_text())[
    "tool"]["setuptools"]["package-dir"]


def compiled_sources() -> list[str]:
    """COMPILED_SOURCES from jmspy/_speedups.py, read without importing jmspy."""
    tree = ast.parse((HERE / "jmspy" / "_speedups.py").read_text())
    for node in tree.body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "COMPILED_SOURCES" and node.value is not None):
            names = ast.literal_eval(node.value)
            assert isinstance(names, tuple), "COMPILED_SOURCES must be a tuple"
            return list(names)
    raise SystemExit("jmspy/_speedups.py has no COMPILED_SOURCES tuple")


def source_of(module: str) -> str:
    """The .py of ``module``, under the deepest package-dir entry that holds it."""
    for package in sorted(PACKAGE_DIRS, key=len, reverse=True):
        if module.startswith(package + "."):
            rest = module[len(package) + 1:].replace(".", "/")
            return f"{PACKAGE_DIRS[package]}/{rest}.py"
    raise SystemExit(f"COMPILED_SOURCES: {module} is in no package-dir of pyproject.toml")


source_extensions = [Extension(name, [source_of(name)]) for name in compiled_sources()]

JOBS = os.cpu_count() or 1

setup(
    # the C compiler runs once per core (build_ext --parallel)
    options={"build_ext": {"parallel": JOBS}},
    # The C that Cython writes beside each compiled source is a build product: an
    # extension's sources count as package data otherwise, and every wheel would carry
    # megabytes of it next to the .so built from it.
    exclude_package_data={"": ["*.c"]},
    ext_modules=cythonize(
        source_extensions,
        nthreads=JOBS,
        language_level=3,
        # Plain Python, compiled as it is: annotations stay annotations (no C typing from
        # them), so both builds behave alike.
        compiler_directives={"annotation_typing": False, "binding": True,
                             "embedsignature": True},
    ) + cythonize(
        extensions,
        language_level=3,
        # Each module's .pxd sits beside its .pyi in jmspy/_cext/, where Cython finds it
        # by the module's full name (jmspy._cext.<name>) on this include path.
        include_path=[str(HERE)],
        annotate=os.environ.get("JMSPY_CYTHON_ANNOTATE") == "1",
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "embedsignature": True,
            "linetrace": TRACE,
        },
    ),
)
