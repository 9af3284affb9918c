"""Documentation that code generates or relies on must not drift from the code."""

from __future__ import annotations

import inspect
import json
import os
import pydoc
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import jmspy_broker
from doc_blocks import CHECKED, OUTPUT, PYTHON, SHELL, Block, all_blocks, section_blocks

from jmspy.properties import reference_table

ROOT = Path(__file__).resolve().parent.parent
#: guards against a hung block only (a failure, not a timing requirement)
HANG = 180
BLOCKS = all_blocks()
RUN = [b for b in BLOCKS if b.not_run_reason is None and b.lang not in OUTPUT]


def test_readme_property_table_matches_the_property_definitions():
    readme = (ROOT / "README.md").read_text()
    assert reference_table() in readme


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "```sh\nbash .ci/test\n```" in readme
    assert ci.rstrip().splitlines()[-1] == "bash .ci/test"


def test_readme_broker_config_example_loads(tmp_path):
    import re

    from jmspy.broker_ref.config import load_config

    readme = (ROOT / "README.md").read_text()
    (example,) = re.findall(r"```toml\n(.*?)```", readme, re.S)
    path = tmp_path / "broker.toml"
    path.write_text(example)
    config = load_config(path)
    assert config.settings["ring.#"].default_ring_size == 3
    assert config.settings["orders.#"].consumer_flow_limit == 100
    assert config.security is not None and config.security.enabled
    assert (config.memory_limit, config.store_limit) == (64 * 1024**2, 100 * 1024**3)
    assert (config.temp_limit, config.send_fail_if_no_space,
            config.send_fail_if_no_space_after_timeout) == (10 * 1024**3, False, 0)
    assert config.settings["orders.#"].memory_limit == 10 * 1024**2
    prices = config.settings["PRICES.>"]
    assert (prices.producer_flow_control, prices.pending_message_limit) == (False, 10)


def test_every_config_key_is_in_the_readme():
    """Every [system-usage] key and every address setting appears in the README's config
    section, under its kebab-case name."""
    import dataclasses

    from jmspy.broker_ref.config import _SYSTEM_USAGE
    from jmspy.broker_ref.core.api import AddressSettings

    readme = (ROOT / "README.md").read_text()
    for key in _SYSTEM_USAGE:
        assert f"{key} = " in readme, key
    for f in dataclasses.fields(AddressSettings):
        assert f"`{f.name.replace('_', '-')}`" in readme or (
            f"{f.name.replace('_', '-')} = " in readme), f.name


def test_security_page_example_loads_and_means_what_the_page_says(tmp_path):
    """docs/security.md's worked example: the rules its last paragraph states."""
    import re

    from jmspy.broker_ref.config import load_config
    from jmspy.broker_ref.core import AccessDenied, Broker, DestinationKind, ServerMessage

    page = (ROOT / "docs" / "security.md").read_text()
    worked = page.split("## A worked example", 1)[1].split("\n## ", 1)[0]
    (example,) = re.findall(r"```toml\n(.*?)```", worked, re.S)
    path = tmp_path / "broker.toml"
    path.write_text(example)
    config = load_config(path)
    assert (config.connect_timeout, config.max_connections_per_address) == (10, 200)
    broker = Broker(**config.broker_kwargs())

    class Inbox:
        def __init__(self):
            self.got = []

        def deliver(self, delivery):
            self.got.append(delivery.message)

        def consumer_closed(self, consumer_id, reason):
            pass

    alice_box, guest_box = Inbox(), Inbox()
    alice = broker.connect(alice_box, user="alice", password="change-me")
    guest = broker.connect(guest_box)
    guest.create_consumer(1, DestinationKind.TOPIC, "prices.#", credit=10)
    for name in ("prices.eur", "prices.eur.internal"):
        alice.send(ServerMessage(f"ID:{name}", DestinationKind.TOPIC, name, body="x",
                                 properties={"JMSXUserID": "mallory"}))
    assert [(m.destination, m.properties["JMSXUserID"]) for m in guest_box.got] == [
        ("prices.eur", "alice")]
    alice.create_consumer(2, DestinationKind.QUEUE, "orders.eu", credit=10)
    alice.send(ServerMessage("ID:o", DestinationKind.QUEUE, "orders.eu", body="o"))
    assert [m.body for m in alice_box.got] == ["o"]
    try:
        alice.all_stats()
    except AccessDenied:
        pass
    else:
        raise AssertionError("alice may not read statistics")
    audrey = broker.connect(Inbox(), user="audrey", password="change-me-too")
    assert {s.name for s in audrey.all_stats()} >= {"orders.eu", "prices.eur"}


def test_every_code_block_is_run_or_says_why_not():
    problems = [p for b in BLOCKS if (p := b.problem()) is not None]
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="session")
def doc_broker() -> Iterator[str]:
    """``jmspy broker --in-memory`` on a free loopback port: the broker a block that names
    127.0.0.1:61613 is run against. Yields its ``host:port``."""
    with jmspy_broker(Path(__file__).parent) as port:
        yield f"127.0.0.1:{port}"


def _run(block: Block, args: list[str], cwd: Path) -> None:
    env = {**os.environ,
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    try:
        done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=HANG, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.where}: the {block.lang} block did not finish: {exc}")
    if done.returncode != 0:
        pytest.fail(f"{block.where}: the {block.lang} block exited {done.returncode}\n"
                    f"--- stdout\n{done.stdout}--- stderr\n{done.stderr}")


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_code_block_runs_as_written(block: Block, tmp_path: Path,
                                    request: pytest.FixtureRequest) -> None:
    """Each block from an empty directory; a traceback's line numbers are the document's
    (the script is named after it)."""
    address = request.getfixturevalue("doc_broker") if block.needs_broker else None
    work = tmp_path / "cwd"
    work.mkdir()
    if block.lang in PYTHON:
        script = work / (block.path.name.replace(".", "_") + ".py")
        script.write_text(block.script(address) if address else block.script())
        _run(block, [sys.executable, script.name], work)
    elif block.lang in SHELL:
        commands = block.commands(address) if address else block.commands()
        _run(block, ["bash", "-euo", "pipefail", "-c", commands], work)
    elif block.lang == "toml":
        from jmspy.broker_ref.config import load_config

        config = tmp_path / "broker.toml"
        config.write_text(block.code)
        try:
            load_config(config)
        except Exception as exc:  # any refusal: reported with the block's place
            pytest.fail(f"{block.where}: the toml block is not a valid broker config: {exc}")
    else:
        assert block.lang in CHECKED
        try:
            json.loads(block.code)
        except ValueError as exc:
            pytest.fail(f"{block.where}: the json block does not parse: {exc}")


def _mypy_path(into: Path) -> Path:
    """A folder holding the installed jmspy as one tree, for mypy: an editable install
    maps jmspy.transports and jmspy.broker_ref from other folders through an import hook
    that mypy does not run (a wheel install already is one tree; linking it changes
    nothing)."""
    import importlib.util

    root = into / "jmspy"
    root.mkdir(parents=True)
    spec = importlib.util.find_spec("jmspy")
    assert spec is not None and spec.submodule_search_locations
    for child in Path(next(iter(spec.submodule_search_locations))).iterdir():
        if child.name != "__pycache__":
            (root / child.name).symlink_to(child)
    for sub in ("transports", "broker_ref"):
        spec = importlib.util.find_spec(f"jmspy.{sub}")
        assert spec is not None and spec.submodule_search_locations
        where = Path(next(iter(spec.submodule_search_locations)))
        if not (root / sub).exists():
            (root / sub).symlink_to(where)
    return into


def _mypy_strict(blocks: list[Block], stem: str, tmp_path: Path
                 ) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` over ``blocks``' scripts, one file each (``stem_N.py``), as a
    user's typed code against the installed package."""
    work = tmp_path / "cwd"
    work.mkdir()
    for n, block in enumerate(blocks):
        (work / f"{stem}_{n}.py").write_text(block.script())
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--cache-dir", os.devnull, *sorted(p.name for p in work.glob("*.py"))],
        cwd=work, capture_output=True, text=True, timeout=HANG,
        env={**os.environ, "MYPYPATH": str(_mypy_path(tmp_path / "path"))})


def test_quick_start_passes_mypy_strict(tmp_path: Path) -> None:
    """The Quick start's blocks, as a user's typed code, against the installed package."""
    quick = section_blocks(ROOT / "README.md", "Quick start")
    assert quick, "README.md has no Python block under '## Quick start'"
    done = _mypy_strict(quick, "quick_start", tmp_path)
    assert done.returncode == 0, "README.md Quick start under mypy --strict (line numbers " \
        "are README.md's):\n" + done.stdout + done.stderr


def test_the_asyncio_page_passes_mypy_strict(tmp_path: Path) -> None:
    """docs/asyncio.md's run blocks, as a user's typed asyncio code, against the
    installed package (``jmspy.aio`` is typed: AsyncIterator[AsyncMessage] and so on)."""
    page = ROOT / "docs" / "asyncio.md"
    run = [b for b in all_blocks() if b.path == page and b.lang in PYTHON
           and b.not_run_reason is None]
    assert len(run) >= 2, "docs/asyncio.md lost its examples"
    done = _mypy_strict(run, "asyncio_page", tmp_path)
    assert done.returncode == 0, "docs/asyncio.md under mypy --strict (line numbers " \
        "are the page's):\n" + done.stdout + done.stderr


#: what a reader of the repository cannot open: the project's private design notes and
#: numbered work items
FORBIDDEN = re.compile(
    r"\bseeds?\s*\d|\bthe seed\b|\bseed's\b|(?-i:\bDESIGN\b)|§|\bissues?\s*#?\d|"
    r"\.\./shared|PEERS\.md", re.IGNORECASE)


def _reader_facing_texts() -> list[Path]:
    docs = [ROOT / "README.md", ROOT / "benchmarks" / "README.md",
            *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "docs").rglob("*.py"))]
    api = (ROOT / "docs" / "api.md").read_text()
    modules = re.findall(r"^::: ([\w.]+)", api, re.M)
    assert modules, "docs/api.md names no module"
    sources: list[Path] = []
    for name in modules:
        obj = pydoc.locate(name)
        assert obj is not None, f"docs/api.md: ::: {name} does not import"
        # a class's page shows the docstrings it inherits too
        for part in (obj.__mro__ if isinstance(obj, type) else (obj,)):
            if getattr(part, "__module__", "jmspy").startswith("jmspy"):
                try:
                    source = inspect.getsourcefile(part)
                except TypeError:  # a compiled twin: the pure-twin run reads its source
                    continue
                if source is not None and Path(source) not in sources:
                    sources.append(Path(source))
    return docs + sources


def test_docs_name_nothing_a_reader_cannot_open():
    """README.md, docs/, benchmarks/README.md and the modules the API reference shows."""
    found = []
    for path in _reader_facing_texts():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if m := FORBIDDEN.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r}: {line.strip()}")
    assert not found, "\n".join(found)
