"""The benchmark peers can run a jmspy broker from another environment (``jmspy@PYTHON``),
so two builds can be measured side by side in one run."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

# Appended, not prepended: the installed jmspy must win over the checkout's jmspy/ folder.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmarks.peers import Endpoint, Peers


def test_a_jmspy_peer_at_an_interpreter_is_that_interpreters_broker() -> None:
    logged: list[str] = []
    with Peers(log=logged.append) as peers:
        got = peers.get(f"jmspy@{sys.executable}")
        assert isinstance(got, Endpoint), got
        assert got.name == f"jmspy@{sys.executable}" and got.stomp_port
        with socket.create_connection((got.host, got.stomp_port), timeout=10) as sock:
            sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
            assert sock.recv(64).startswith(b"CONNECTED\n")
    assert logged == [f"starting jmspy@{sys.executable} ..."]


def test_a_peer_at_a_missing_interpreter_says_what_to_name_instead() -> None:
    with Peers(log=lambda _: None) as peers:
        reason = peers.get("jmspy-uvloop@/nonexistent/bin/python")
    assert isinstance(reason, str)
    assert "no Python interpreter at '/nonexistent/bin/python'" in reason
    assert "jmspy installed" in reason


def test_only_jmspy_brokers_can_be_run_by_another_interpreter() -> None:
    with Peers(log=lambda _: None) as peers:
        reason = peers.get(f"activemq@{sys.executable}")
    assert isinstance(reason, str) and "only jmspy@PYTHON and jmspy-uvloop@PYTHON" in reason


def test_the_nospin_peer_is_the_broker_with_its_polling_window_off() -> None:
    """Started with ``--idle-spin-us 0`` (the flag's range check is in test_cli.py): it
    serves like the default broker."""
    with Peers(log=lambda _: None) as peers:
        got = peers.get("jmspy-uvloop-nospin")
        assert isinstance(got, Endpoint), got
        with socket.create_connection((got.host, got.stomp_port), timeout=10) as sock:
            sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
            assert sock.recv(64).startswith(b"CONNECTED\n")
