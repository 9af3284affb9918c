"""``import jmspy`` in a source checkout's root (jmspy/_checkout.py): the checkout's
``jmspy/`` folder is refused with the reason and the fix, unless an install maps the
checkout's ``transports/`` and ``broker_ref/`` into it.

Each test builds a checkout in a temporary directory (a copy of this repository's
``jmspy/``, ``transports/``, ``broker_ref/``, ``docs/capabilities.md`` and
``pyproject.toml``) beside the jmspy this suite runs on, and runs Python in its root.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import jmspy
from jmspy.transports import capabilities as matrix

ROOT = Path(__file__).resolve().parent.parent
#: The package this suite imports: the one a refusal must point to.
INSTALLED = Path(jmspy.__file__).resolve().parent
_BUILT = shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "*.c", "*.html")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    for folder in ("jmspy", "transports", "broker_ref"):
        shutil.copytree(ROOT / folder, root / folder, ignore=_BUILT)
    (root / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "capabilities.md", root / "docs")
    shutil.copy(ROOT / "pyproject.toml", root)
    (root / "script.py").write_text("import jmspy\n")
    return root


def _python(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


@pytest.mark.parametrize("args", [("-c", "import jmspy"), ("-m", "jmspy", "--help"),
                                  ("script.py",)], ids=["-c", "-m", "script"])
def test_importing_the_checkout_folder_names_it_the_installed_copy_and_the_fix(
        checkout: Path, args: tuple[str, ...]) -> None:
    run = _python(checkout, *args)
    assert run.returncode != 0
    err = " ".join(run.stderr.split())  # the message, unwrapped
    assert "ImportError" in err
    assert f"found {checkout / 'jmspy'}, the source folder of the jmspy checkout" in err
    assert "jmspy.transports and jmspy.broker_ref live in" in err
    assert f"The installed jmspy is {INSTALLED}" in err
    assert "run from another directory" in err and "python -P -m jmspy" in err
    assert f"`pip install -e {checkout}`" in err
    # nothing that would fetch jmspy from a package index, nothing about C compilers
    assert "pip install jmspy" not in err and "--force-reinstall" not in err
    assert "not built" not in err


def test_python_dash_p_in_the_checkout_root_imports_the_installed_package(
        checkout: Path) -> None:
    run = _python(checkout, "-P", "-c", "import jmspy; print(jmspy.__file__)")
    assert run.returncode == 0, run.stderr
    assert Path(run.stdout.strip()).parent == INSTALLED


def test_with_no_jmspy_installed_the_error_says_to_install_the_checkout(
        checkout: Path) -> None:
    run = _python(checkout, "-S", "-c", "import jmspy")  # -S: no site-packages at all
    err = " ".join(run.stderr.split())
    assert run.returncode != 0
    assert "No installed jmspy was found" in err
    assert f"`pip install {checkout}`, and run from another directory" in err
    assert f"`pip install -e {checkout}`" in err


def test_a_virtualenv_inside_the_checkout_is_found_as_the_installed_copy(
        checkout: Path) -> None:
    """The README's first command makes ``.venv`` in the checkout's root: the jmspy
    installed there is the installed copy to name, though it lives inside the checkout."""
    site = checkout / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (site / "jmspy").symlink_to(INSTALLED, target_is_directory=True)
    run = _python(checkout, "-S", "-c", f"import sys; sys.path.append({str(site)!r}); "
                                        "import jmspy")
    err = " ".join(run.stderr.split())
    assert run.returncode != 0
    assert f"The installed jmspy is {INSTALLED}" in err, err
    assert "No installed jmspy was found" not in err


#: What an editable install of the checkout adds: its sibling folders mapped in.
_MAP_SIBLINGS = """
import importlib.machinery, os, sys
class Siblings:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in ("jmspy.transports", "jmspy.broker_ref"):
            return importlib.machinery.PathFinder.find_spec(name, [os.getcwd()])
        return None
sys.meta_path.insert(0, Siblings)
import jmspy, jmspy.broker_ref
print(jmspy.__file__, jmspy.broker_ref.__file__)
"""


def test_a_checkout_whose_siblings_are_mapped_in_is_the_package(checkout: Path) -> None:
    # pure twins: the copied folder has no compiled modules, and must not need them here
    run = subprocess.run([sys.executable, "-c", _MAP_SIBLINGS], cwd=checkout, text=True,
                         capture_output=True, timeout=120,
                         env={**os.environ, "JMSPY_PUREPYTHON": "1"})
    assert run.returncode == 0, run.stderr
    package, broker = map(Path, run.stdout.split())
    assert package == checkout / "jmspy" / "__init__.py"
    assert broker == checkout / "broker_ref" / "__init__.py"


def test_the_documented_regeneration_command_runs_in_the_checkout_root(
        checkout: Path) -> None:
    doc = checkout / "docs" / "capabilities.md"
    text = doc.read_text(encoding="utf-8")
    command = next(line for line in text.splitlines()
                   if line.startswith("python ") and "jmspy.transports.capabilities" in line)
    head, _, tail = text.partition(matrix.BEGIN)
    doc.write_text(f"{head}{matrix.BEGIN}\nstale\n{matrix.END}{tail.partition(matrix.END)[2]}",
                   encoding="utf-8")
    run = _python(checkout, *shlex.split(command)[1:])
    assert run.returncode == 0, run.stderr
    assert doc.read_text(encoding="utf-8") == text
