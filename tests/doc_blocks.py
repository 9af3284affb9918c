"""The fenced code blocks of README.md and docs/*.md, and how tests/test_docs.py runs each.

Every block is run, checked or explicitly excused, so the docs cannot drift from the code:

* ```python blocks run as a script in a fresh process from an empty directory;
* ```sh / ```bash / ```console blocks run in bash there (``console``: the ``$ `` lines);
* ```toml blocks load as a broker config file, ```json blocks parse;
* ```text blocks show output and are not run.

A block that cannot run says why in an HTML comment on the line before its fence:
``<!-- not run: needs a running ActiveMQ 5 -->``. A Python block that goes on from the
Python block before it in the same file (using its names) says so with
``<!-- after the block above -->``; the two run as one script. A block that names the
STOMP address ``127.0.0.1:61613`` (what ``jmspy broker`` listens on by default, so a
reader can paste it; in a shell block also ``--port 61613``) runs against a ``jmspy broker
--in-memory`` that the test starts on a free loopback port; the runner rewrites the
address to that port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the address a block names to get the test's broker
BROKER_ADDRESS = "127.0.0.1:61613"
_PORT_OPTION = re.compile(r"--port[ =]61613\b")
PYTHON = ("python",)
SHELL = ("sh", "bash", "console", "shell")
CHECKED = ("toml", "json")
OUTPUT = ("text",)
CONTINUES = "after the block above"
_FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)\s*$")
_COMMENT = re.compile(r"^<!--\s*(.*?)\s*-->$")


@dataclass
class Block:
    """One fenced block: where it is, its language, its text and the marker before it."""

    path: Path
    line: int  # the line of the opening fence, 1-based
    lang: str
    code: str
    marker: str = ""
    #: the Python blocks before this one that it goes on from (oldest first)
    before: list[Block] = field(default_factory=list)

    @property
    def where(self) -> str:
        name = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{name}:{self.line}"

    @property
    def not_run_reason(self) -> str | None:
        if self.marker.startswith("not run:"):
            return self.marker.removeprefix("not run:").strip()
        return None

    @property
    def needs_broker(self) -> bool:
        return any(BROKER_ADDRESS in b.code for b in [*self.before, self]) or (
            self.lang in SHELL and _PORT_OPTION.search(self.code) is not None)

    def problem(self) -> str | None:
        """Why this block is neither run nor properly excused (None: it is fine)."""
        if self.marker.startswith("not run"):
            if not self.not_run_reason:
                return f"{self.where}: 'not run' needs a reason: <!-- not run: why -->"
            return None
        if self.marker and self.marker != CONTINUES:
            return (f"{self.where}: unknown marker <!-- {self.marker} -->; use "
                    f"<!-- not run: REASON --> or <!-- {CONTINUES} -->")
        if self.marker == CONTINUES and (self.lang not in PYTHON or not self.before):
            return (f"{self.where}: <!-- {CONTINUES} --> needs a Python block after "
                    "another Python block of the same file")
        if self.lang not in (*PYTHON, *SHELL, *CHECKED, *OUTPUT):
            label = self.lang or "no language"
            return (f"{self.where}: a ```{label} block is neither run nor marked: label it "
                    "```python, ```sh, ```toml, ```json or ```text (output), or put "
                    "<!-- not run: REASON --> on the line before it")
        return None

    def script(self, address: str = BROKER_ADDRESS) -> str:
        """The block as a script whose line numbers are the document's: a traceback's
        line N is line N of the Markdown file (blocks it goes on from included)."""
        lines = [""] * (self.line + self.code.count("\n") + 1)
        for b in [*self.before, self]:
            for i, text in enumerate(b.code.splitlines()):
                lines[b.line + i] = text  # the fence is at b.line, code starts after it
        return "\n".join(lines).replace(BROKER_ADDRESS, address) + "\n"

    def commands(self, address: str = BROKER_ADDRESS) -> str:
        """A shell block's commands (``console``: only the ``$ `` lines)."""
        code = self.code
        if self.lang == "console":
            code = "\n".join(x[2:] for x in code.splitlines() if x.startswith("$ "))
        port = address.rpartition(":")[2]
        return _PORT_OPTION.sub(f"--port {port}", code.replace(BROKER_ADDRESS, address))


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of one Markdown file, in order."""
    found: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2).lower(), i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != fence:
            j += 1
        if j == len(lines):
            raise ValueError(f"{Block(path, start + 1, lang, '').where}: the block is not closed")
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        comment = _COMMENT.match(lines[k].strip()) if k >= 0 else None
        block = Block(path, start + 1, lang, "\n".join(lines[start + 1:j]) + "\n",
                      comment.group(1) if comment else "")
        if block.marker == CONTINUES and lang in PYTHON:
            previous = [b for b in found if b.lang in PYTHON and b.not_run_reason is None]
            if previous:
                block.before = [*previous[-1].before, previous[-1]]
        found.append(block)
        i = j + 1
    return found


def all_blocks() -> list[Block]:
    return [b for path in doc_files() for b in blocks(path)]


def section_blocks(path: Path, heading: str) -> list[Block]:
    """The Python blocks under one ``## heading`` (up to the next heading of that level)."""
    lines = path.read_text().splitlines()
    start = lines.index(f"## {heading}") + 1
    end = next((n for n in range(start, len(lines)) if lines[n].startswith("## ")),
               len(lines))
    return [b for b in blocks(path) if start < b.line <= end and b.lang in PYTHON]
