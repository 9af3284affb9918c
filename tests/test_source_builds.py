"""The modules Cython compiles from their own source (``_speedups.COMPILED_SOURCES``): the
build each mode asks for is the one imported, and a missing build is a loud error."""

from __future__ import annotations

import importlib.machinery
import subprocess
import sys
from pathlib import Path

import pytest

from jmspy._speedups import SourceBuildFinder

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _spec(name: str, origin: Path) -> importlib.machinery.ModuleSpec:
    return importlib.machinery.ModuleSpec(name, None, origin=str(origin))


def test_the_pure_mode_swaps_an_extension_for_the_source_beside_it(tmp_path):
    (tmp_path / "mod.py").write_text("X = 1\n")
    chosen = SourceBuildFinder(["pkg.mod"], pure=True).choose(
        "pkg.mod", _spec("pkg.mod", tmp_path / f"mod{SUFFIX}"))
    assert chosen.origin == str(tmp_path / "mod.py")
    assert isinstance(chosen.loader, importlib.machinery.SourceFileLoader)


def test_the_pure_mode_keeps_a_source_it_was_given(tmp_path):
    spec = _spec("pkg.mod", tmp_path / "mod.py")
    assert SourceBuildFinder(["pkg.mod"], pure=True).choose("pkg.mod", spec) is spec


def test_the_compiled_mode_keeps_the_extension(tmp_path):
    spec = _spec("pkg.mod", tmp_path / f"mod{SUFFIX}")
    assert SourceBuildFinder(["pkg.mod"], pure=False).choose("pkg.mod", spec) is spec


def test_the_compiled_mode_refuses_a_module_that_was_not_built(tmp_path):
    with pytest.raises(ImportError, match=r"pkg\.mod is not built.*JMSPY_PUREPYTHON=1"):
        SourceBuildFinder(["pkg.mod"], pure=False).choose(
            "pkg.mod", _spec("pkg.mod", tmp_path / "mod.py"))


def test_a_pure_source_that_is_missing_is_an_import_error(tmp_path):
    with pytest.raises(ImportError, match=r"pure-Python source of pkg\.mod is missing"):
        SourceBuildFinder(["pkg.mod"], pure=True).choose(
            "pkg.mod", _spec("pkg.mod", tmp_path / f"mod{SUFFIX}"))


def test_other_modules_are_left_to_the_other_finders():
    assert SourceBuildFinder(["pkg.mod"], pure=True).find_spec("json", None) is None


@pytest.mark.parametrize(("choice", "sources_pure", "twins"), [
    ("1", "True", "False"), ("", "False", "True"), ("sources", "True", "True")])
def test_a_fresh_interpreter_has_the_finder_first_and_the_build_its_mode_asks_for(
        choice, sources_pure, twins):
    """Once ``jmspy`` is imported the finder is first on ``sys.meta_path`` (ahead of every
    module COMPILED_SOURCES may list) in every mode; ``sources`` interprets the listed
    modules and keeps the compiled twins."""
    code = ("import sys, jmspy; from jmspy import _speedups as s; "
            "print(type(sys.meta_path[0]).__name__, s.PURE_SOURCES, "
            "s.is_extension(s.load('stomp_codec')))")
    env = {"JMSPY_PUREPYTHON": choice, "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, cwd=Path(__file__).parent)
    assert out.stdout.split() == ["SourceBuildFinder", sources_pure, twins]
