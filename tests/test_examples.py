"""The documented examples run and print what the docs say they print."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"


def _children() -> ModuleType:
    """docs/examples/children.py, the examples' broker child (not a package module)."""
    spec = importlib.util.spec_from_file_location("example_children", EXAMPLES / "children.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flow_batches_example_prints_batches_of_1000_then_500():
    # from the repository's root, as its docstring runs it
    out = subprocess.run(
        [sys.executable, "docs/examples/flow_batches.py"],
        check=True, capture_output=True, text=True, timeout=120, cwd=ROOT,
    ).stdout
    lines = out.splitlines()
    assert "delivered=1000" in lines[0] and "deliveringCount=1000" in lines[0]
    assert "delivered=1000" in lines[1] and "batches=1" in lines[1]
    assert "deliveringCount=501" in lines[1]
    assert "delivered=1500" in lines[2] and "batches=2" in lines[2]
    assert "deliveringCount=1000" in lines[2] and "messageCount=2500" in lines[2]
    assert lines[3].startswith("batches: first 1000, then 500")


def test_demo_command_prints_flow_counters_and_finishes(tmp_path):
    # cwd outside the checkout: `-m` puts cwd first on sys.path, and the source tree's
    # jmspy/ is not the installed package (transports/ and broker_ref/ map into it).
    out = subprocess.run(
        [sys.executable, "-m", "jmspy", "demo", "--fast", "--messages", "3000"],
        check=True, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    ).stdout
    assert "imqConsumerFlowLimit=1000" in out
    assert "done: 3000 messages" in out and "set by client" in out


def test_an_example_broker_that_dies_at_start_is_reported_with_its_exit_code_and_stderr(
        tmp_path: Path) -> None:
    children = _children()
    missing = tmp_path / "missing.toml"
    with pytest.raises(children.ChildDied) as died:
        children.Broker(str(tmp_path), "--config", str(missing))
    text = str(died.value)
    assert "the jmspy broker (pid " in text and "exited with code 2" in text
    assert f"cannot read config file {missing}" in text  # the broker's own stderr


def test_an_example_broker_that_dies_later_is_reported_at_the_next_check(
        tmp_path: Path) -> None:
    children = _children()
    broker = children.Broker(str(tmp_path))
    try:
        assert broker.banner.startswith("jmspy broker listening on 127.0.0.1:")
        broker.check()  # running: nothing to report
        subprocess.run(["kill", "-KILL", str(broker.pid)], check=True)
        with pytest.raises(children.ChildDied, match=r"\) was killed by SIGKILL; its stderr"):
            for _ in range(200):
                broker.check()
                time.sleep(0.05)  # waits for the kernel to end the killed broker
    finally:
        broker.stop()
