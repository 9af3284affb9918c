"""Builds the Cython twins in cython_ext/ as jmspy._cext.<name>.

A compile error fails the build: there is no silent fallback to pure Python at install
time (set JMSPY_PUREPYTHON=1 at run time to choose the pure twins deliberately).
JMSPY_CYTHON_ANNOTATE=1 writes Cython's HTML annotation next to each .pyx;
JMSPY_CYTHON_TRACE=1 compiles with line tracing for profilers.
"""

from __future__ import annotations

import os
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

setup(
    ext_modules=cythonize(
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
