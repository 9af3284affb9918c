"""Builds the Cython twins in cython_ext/ as jmspy._cext.<name> (each beside its pure
twin's ``.py``; jmspy/_speedups.py chooses between them at run time).

A compile error fails the build: there is no silent fallback to pure Python at install
time (set JMSPY_PUREPYTHON=1 at run time to choose the pure twins deliberately).

What the build needs: a C compiler and the Python headers (Debian: ``gcc`` and
``python3-dev``); Cython comes from the build requirements in pyproject.toml.

Cython runs when the extensions are built (``build_ext``), not when this file is read, so
``python -m build --sdist`` writes no C: the source distribution carries the .pyx, .pxd,
.pxi and .py sources and builds from them.

With gcc or clang the C is compiled at ``-O3`` without debug information, and the
extensions are linked stripped (``-s``; not on macOS, whose linker ignores it): Python's
own CFLAGS say ``-O3 -g``, and the debug information made each extension several
megabytes for nothing a user runs. ``-O3`` stays: against ``-O2`` it took part (a)'s
``vm://`` listener path from 1.022x behind the last ``-O3 -g`` build to level with it and
halved the end-to-end gap (``benchmarks.build_compare``, 61 paired rounds; the
instructions per message under callgrind fell by 1.6 %), for 15 % more compile time and
50 KB more wheel (benchmarks/README.md, "Comparing builds and twins").
Environment switches, all off by default:

* JMSPY_CYTHON_DEBUG=1 keeps Python's flags (``-O3 -g``) and the symbols, for gdb or perf;
* JMSPY_CYTHON_TRACE=1 compiles with line tracing for profilers;
* JMSPY_CYTHON_ANNOTATE=1 writes Cython's HTML annotation next to each .pyx.
"""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import sys
import sysconfig
import tomllib
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent
TRACE = os.environ.get("JMSPY_CYTHON_TRACE") == "1"
DEBUG = os.environ.get("JMSPY_CYTHON_DEBUG") == "1"

#: Added after Python's own CFLAGS (so they win) for gcc and clang, unless DEBUG.
OPTIMISE_ARGS = ["-O3", "-g0"]
#: Linker arguments for the same compilers: strip every symbol the import does not need.
STRIP_ARGS = [] if sys.platform == "darwin" else ["-s"]

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


JOBS = os.cpu_count() or 1


def cythonized(module_list: list[Extension]) -> list[Extension]:
    """``module_list`` with each extension's sources turned into C by Cython."""
    return cythonize(
        module_list,
        nthreads=JOBS,
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
    )


def stale_builds(built: set[str]) -> list[Path]:
    """Extensions beside a .py in the package folders that this build does not make: left
    by an older build that compiled modules from their own source (a retired mechanism).
    Python would import such a file instead of the .py beside it, so an in-place build
    removes it."""
    stale: list[Path] = []
    for package, folder in PACKAGE_DIRS.items():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            for ext_file in (HERE / folder).glob(f"*{suffix}"):
                stem = ext_file.name[: -len(suffix)]
                if (ext_file.with_name(stem + ".py").is_file()
                        and f"{package}.{stem}" not in built):
                    stale.append(ext_file)
    return stale


def check_tools() -> None:
    """Stop before Cython and the compiler run, naming what is missing, rather than after
    a compiler's "command not found" or "Python.h: No such file"."""
    missing: list[str] = []
    if os.name == "posix":  # the compiler distutils will run: $CC, else Python's own
        cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
        if shutil.which(cc) is None:
            missing.append(f"a C compiler (`{cc}` is not on PATH; Debian: gcc)")
    headers = Path(sysconfig.get_config_var("INCLUDEPY") or "") / "Python.h"
    if not headers.is_file():
        missing.append(f"the Python headers ({headers} is missing; Debian: python3-dev)")
    if missing:
        raise SystemExit("jmspy compiles its Cython modules when it is installed from "
                         "source and needs " + " and ".join(missing) + ".")


class BuildExt(build_ext):
    """Runs Cython at build time and passes the compiler the flags the docstring names."""

    def run(self) -> None:
        check_tools()
        done = {e.name: e.sources for e in cythonized(self.extensions)}
        for ext in self.extensions:
            ext.sources = done[ext.name]
        if self.inplace:
            for path in stale_builds({e.name for e in self.extensions}):
                print(f"removing {path}: a module no longer compiled")
                path.unlink()
        super().run()

    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "unix" and not DEBUG:  # gcc or clang
            for ext in self.extensions:
                ext.extra_compile_args = [*ext.extra_compile_args, *OPTIMISE_ARGS]
                ext.extra_link_args = [*ext.extra_link_args, *STRIP_ARGS]
        super().build_extensions()


setup(
    # the C compiler runs once per core (build_ext --parallel)
    options={"build_ext": {"parallel": JOBS}},
    cmdclass={"build_ext": BuildExt},
    # The C that Cython writes beside each compiled source is a build product: an
    # extension's sources count as package data otherwise, and every wheel would carry
    # megabytes of it next to the .so built from it.
    exclude_package_data={"": ["*.c"]},
    ext_modules=extensions,
)
