"""The API guide's examples pass mypy --strict: docs/api-guide.md, the README's "More of
the API" section and docs/flow-control.md's "Property names" (tests/test_docs.py runs
them, with every other block of the docs)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    rest = text[start + len(heading):]
    end = re.search(r"^## ", rest, re.M)
    return rest[: end.start()] if end else rest


def _blocks() -> list[tuple[str, str]]:
    api = (ROOT / "docs" / "api-guide.md").read_text()
    readme = _section((ROOT / "README.md").read_text(), "## More of the API")
    flow = _section((ROOT / "docs" / "flow-control.md").read_text(), "## Property names")
    found: list[tuple[str, str]] = []
    for where, text in (("docs/api-guide.md", api), ("README.md", readme),
                        ("docs/flow-control.md", flow)):
        for n, block in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
            found.append((f"{where}#{n}", block))
    return found


BLOCKS = _blocks()


def test_the_pages_have_the_examples_this_test_runs() -> None:
    where = [name.partition("#")[0] for name, _ in BLOCKS]
    assert where.count("docs/api-guide.md") == 4
    assert where.count("README.md") == 1 and where.count("docs/flow-control.md") == 1


def test_the_api_examples_pass_mypy_strict(tmp_path: Path) -> None:
    paths = []
    for n, (_, code) in enumerate(BLOCKS):
        path = tmp_path / f"example_{n}.py"
        path.write_text(code)
        paths.append(str(path))
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--no-incremental", *paths],
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
