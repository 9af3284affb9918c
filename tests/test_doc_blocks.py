"""tests/doc_blocks.py, the extractor behind tests/test_docs.py: what counts as run, as
excused or as neither, and where a failure points."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from doc_blocks import BROKER_ADDRESS, blocks, section_blocks

PAGE = '''# Page

```python
x = 1
```

<!-- after the block above -->
```python
print(x + 1)
```

<!-- not run: needs a real ActiveMQ -->
```python
connect_to_activemq()
```

```
raw output with no label
```

<!-- not run: -->
```sh
rm -rf /
```

<!-- run me maybe -->
```text
out
```

## Quick start

```sh
jmspy stat --port 61613
```

```python
print("127.0.0.1:61613")
```
'''


@pytest.fixture
def page(tmp_path: Path) -> list:
    path = tmp_path / "page.md"
    path.write_text(PAGE)
    return blocks(path)


def test_blocks_are_found_with_the_line_of_their_fence_and_their_marker(page):
    assert [(b.line, b.lang) for b in page] == [
        (3, "python"), (8, "python"), (13, "python"), (17, ""), (22, "sh"), (27, "text"),
        (33, "sh"), (37, "python")]
    assert page[1].before == [page[0]]
    assert page[2].not_run_reason == "needs a real ActiveMQ"


def test_a_block_neither_run_nor_excused_is_named_with_its_place(page):
    problems = {b.line: b.problem() for b in page}
    assert problems[3] is None and problems[8] is None and problems[13] is None
    assert "page.md:17: a ```no language block is neither run nor marked" in problems[17]
    assert "page.md:22: 'not run' needs a reason" in problems[22]
    assert "page.md:27: unknown marker <!-- run me maybe -->" in problems[27]


def test_a_continued_script_keeps_the_documents_line_numbers(page, tmp_path):
    script = page[1].script()
    lines = script.splitlines()
    assert lines[3] == "x = 1" and lines[8] == "print(x + 1)"  # lines 4 and 9 of the page
    path = tmp_path / "run.py"
    path.write_text(script.replace("print(x + 1)", "print(x + undefined)"))
    import subprocess

    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          check=False)
    assert "line 9" in done.stderr and "NameError" in done.stderr


def test_the_broker_address_and_port_are_rewritten_to_the_fixtures(page):
    stat, script = page[6], page[7]
    assert stat.needs_broker and script.needs_broker and not page[0].needs_broker
    assert stat.commands("127.0.0.1:40001") == "jmspy stat --port 40001\n"
    assert 'print("127.0.0.1:40001")' in script.script("127.0.0.1:40001")
    assert BROKER_ADDRESS not in script.script("127.0.0.1:40001")


def test_section_blocks_are_the_python_blocks_under_one_heading(tmp_path):
    path = tmp_path / "page.md"
    path.write_text(PAGE)
    assert [b.line for b in section_blocks(path, "Quick start")] == [37]


def test_an_unclosed_block_is_refused_with_its_place(tmp_path):
    path = tmp_path / "bad.md"
    path.write_text("text\n\n```python\nx = 1\n")
    with pytest.raises(ValueError, match=r"bad\.md:3: the block is not closed"):
        blocks(path)
