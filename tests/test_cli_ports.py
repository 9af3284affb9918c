"""Every ``jmspy`` command that takes a port refuses one outside 1-65535 before doing
anything, naming the range: ``jmspy broker --port 99999`` used to listen on port 34463
(the socket layer keeps the low 16 bits) without a word. The broker alone takes 0, which
means "any free port" there and is named in its "listening on" line."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from jmspy.cli import main

#: guards against a hung subprocess only (a failure, not a timing requirement)
HANG = 120


@pytest.mark.parametrize("command", ["broker", "stat"])
@pytest.mark.parametrize(("value", "says"), [
    ("99999", "port 99999 is out of range"),
    ("65536", "port 65536 is out of range"),
    ("-1", "port -1 is out of range"),
    ("http", "'http' is not a port number"),
])
def test_a_port_out_of_range_is_an_argparse_error_naming_the_range(
    capsys: pytest.CaptureFixture[str], command: str, value: str, says: str,
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, f"--port={value}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: jmspy {command}")
    assert f"jmspy {command}: error: argument --port: {says}" in err
    assert "1-65535" in err


def test_stat_refuses_port_0_which_no_broker_listens_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["stat", "--port", "0"])
    assert "argument --port: port 0 is out of range: use 1-65535" in capsys.readouterr().err


def test_the_broker_takes_port_0_as_any_free_port_and_names_the_port_it_got() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "jmspy", "broker", "--port", "0", "--in-memory"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once it listens
        got = re.match(r"jmspy broker listening on 127\.0\.0\.1:(\d+) ", line)
        assert got is not None and 1 <= int(got.group(1)) <= 65535, line
    finally:
        proc.terminate()
        proc.communicate(timeout=HANG)
    assert proc.returncode == 0


@pytest.mark.parametrize(("url", "says"), [
    ("stomp://127.0.0.1:99999", "stomp://127.0.0.1:99999: port 99999 is out of range: use "
     "1-65535"),
    ("stomp://127.0.0.1:0", "port 0 is out of range: use 1-65535"),
    ("mqtt://[::1]:70000", "port 70000 is out of range"),
    ("stomp://h1:61613,stomp://h2:616130", "stomp://h2:616130: port 616130 is out of range"),
    ("stomp://h:61x", "'61x' is not a port number: use an integer 1-65535"),
])
def test_the_worker_refuses_a_url_whose_port_is_out_of_range(
    capsys: pytest.CaptureFixture[str], url: str, says: str,
) -> None:
    assert main(["worker", url, "q", "no_such_module:f"]) == 2  # before the listener
    err = capsys.readouterr().err.strip()
    assert err.startswith("jmspy worker: error: ") and "\n" not in err, err
    assert says in err, err
