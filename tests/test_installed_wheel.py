"""The suite's jmspy is the wheel, installed: compiled, stripped, and its demo runs.

tox builds the wheel once and installs it into each environment, and says so with
``JMSPY_TEST_INSTALLED=wheel``; these tests then check that the package imported is that
install (not a checkout's folder, not an editable install), that the wheel's extensions
are stripped, and that the README's demo command runs from an empty directory. On an
editable install (development) they are skipped, saying why.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import json
import os
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import jmspy

WHEEL = os.environ.get("JMSPY_TEST_INSTALLED") == "wheel"
pytestmark = pytest.mark.skipif(
    not WHEEL, reason="runs where the suite tests an installed wheel "
    "(tox sets JMSPY_TEST_INSTALLED=wheel)")

_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def _elf_sections(path: Path) -> set[str]:
    """The section names of a 64-bit little-endian ELF file (what `strip` removes shows
    as missing ``.symtab`` and ``.debug_*`` sections)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path}: not ELF64 LE"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i: int) -> tuple[int, int, int]:
        name, = struct.unpack_from("<I", data, shoff + i * shentsize)
        offset, size = struct.unpack_from("<QQ", data, shoff + i * shentsize + 0x18)
        return name, offset, size
    _, str_offset, _ = header(shstrndx)
    names = set()
    for i in range(shnum):
        name, _, _ = header(i)
        end = data.index(b"\0", str_offset + name)
        names.add(data[str_offset + name:end].decode())
    return names


def test_the_package_under_test_is_the_installed_wheel() -> None:
    package = Path(jmspy.__file__).resolve().parent
    site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    assert package.parent in site, f"{package} is not in site-packages {sorted(site)}"
    dist = importlib.metadata.distribution("jmspy")
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    assert not direct.get("dir_info", {}).get("editable"), direct
    assert direct.get("url", "").endswith(".whl"), direct  # installed from the built wheel


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads ELF files")
def test_the_wheels_extensions_are_stripped() -> None:
    files = importlib.metadata.distribution("jmspy").files or []
    extensions = [Path(str(f.locate())) for f in files if str(f).endswith(_SUFFIXES)]
    assert extensions, "the wheel holds no compiled modules"
    for path in extensions:
        sections = _elf_sections(path)
        assert ".text" in sections, path
        kept = {s for s in sections if s == ".symtab" or s.startswith(".debug")}
        assert kept == set(), f"{path.name} is not stripped: {sorted(kept)}"


def test_the_readme_demo_command_runs_from_an_empty_directory(tmp_path: Path) -> None:
    # the console script the wheel installed, as the README runs it (`.venv/bin/jmspy
    # demo`), unpaced so it takes no 8 s
    script = Path(sys.executable).parent / "jmspy"
    run = subprocess.run([str(script), "demo", "--fast", "--messages", "2000"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "imqConsumerFlowLimit=1000" in run.stdout
    assert "done: 2000 messages" in run.stdout and "set by client" in run.stdout
