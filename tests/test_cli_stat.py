"""``jmspy stat`` as a user meets it: the table lists the broker's destinations and not
the temporary queue stat itself receives the answer on, a refusal is said once, and a
reader that closes the pipe early (``jmspy stat | head -1``) ends it quietly -- it and
every other command that prints (``demo``, the help texts). The broker
is an in-process one served over STOMP (``add_connector``), and also a ``jmspy broker``
subprocess for the refusal, as a user would run them."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import stomp
from broker_process import jmspy_broker
from brokers import free_port

from jmspy import ConnectionFactory, Queue
from jmspy.broker_ref.protocols.stomp.client import fetch_report
from jmspy.broker_ref.protocols.stomp.mapping import STATS_DESTINATION, STATS_REPLY_HEADER
from jmspy.cli import main
from jmspy.cli_support import CLOSED_PIPE_EXIT, run_quietly_on_closed_pipe

#: guards against a hung subprocess only (a failure, not a timing requirement)
HANG = 300


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


@pytest.fixture
def served(vm_broker_factory: Callable[..., Any]) -> tuple[int, ConnectionFactory]:
    """An in-process broker with one message on ``orders``, served over STOMP: its port."""
    host, factory = vm_broker_factory()
    port = _port(host.add_connector())
    with factory.create_connection() as conn:
        session = conn.create_session()
        session.create_producer(Queue("orders")).send(session.create_text_message("x"))
    return port, factory


def _names(stdout: str) -> list[str]:
    """The destination column of ``jmspy stat``'s table (after the usage line)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["destination",
                                                                           "kind"])
    return [line.split()[0] for line in lines[start + 1:]]


def test_stat_lists_the_destinations_but_not_its_own_reply_queue(
    served: tuple[int, ConnectionFactory], capsys: pytest.CaptureFixture[str],
) -> None:
    port, _ = served
    assert main(["stat", "--port", str(port)]) == 0
    assert _names(capsys.readouterr().out) == ["orders"]


def test_another_clients_temporary_queue_is_still_listed(
    served: tuple[int, ConnectionFactory],
) -> None:
    """Only the queue made for the stats answer is left out, not temporary queues."""
    port, factory = served
    with factory.create_connection() as conn:
        temp = conn.create_session().create_temporary_queue()
        rows, _ = fetch_report("127.0.0.1", port)
    names = sorted(str(row["name"]) for row in rows)
    assert names == sorted(["orders", temp.name]) and temp.name.startswith("temp-queue://")


@pytest.mark.parametrize(("reply_to", "names_it"), [
    ("/temp-queue/answers", True), ("/queue/answers", False)])
def test_the_stats_answer_names_the_reply_queue_only_when_it_is_the_askers_temporary_one(
    served: tuple[int, ConnectionFactory], reply_to: str, names_it: bool,
) -> None:
    """Any STOMP client may ask; only its own temporary queue is named as the one to
    leave out, never an ordinary queue (which stays in the list)."""
    answers: queue.Queue[stomp.utils.Frame] = queue.Queue()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame: stomp.utils.Frame) -> None:
            answers.put(frame)

    conn = stomp.Connection12([("127.0.0.1", served[0])])
    conn.set_listener("answers", Listener())
    conn.connect(wait=True, headers={"host": "/"})
    try:
        conn.subscribe(reply_to, id="s")
        conn.send(STATS_DESTINATION, "", headers={"reply-to": reply_to})
        frame = answers.get(timeout=HANG)
    finally:
        conn.disconnect()
    names = {row["name"] for row in json.loads(frame.body)}
    named = frame.headers.get(STATS_REPLY_HEADER)
    if names_it:
        assert named is not None and named.startswith("temp-queue://") and named in names
    else:
        assert named is None and "answers" in names


CONFIG = """
[security]
[security.users.alice]
password = "alice-pw"
roles = ["ops"]

[[security.permissions]]
match = "#"
admin = ["ops"]
"""


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """``jmspy broker --in-memory`` with security on: its port."""
    with jmspy_broker(tmp_path_factory.mktemp("secured"), config=CONFIG) as port:
        yield port


@pytest.mark.parametrize(("login", "reason"), [
    (["--user", "alice", "--password", "wrong"], "authentication failed for user 'alice'"),
    ([], "authentication required"),
])
def test_stat_says_a_refusal_once(secured: int, login: list[str], reason: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JMSPY_PASSWORD"}
    done = subprocess.run([sys.executable, "-m", "jmspy", "stat", "--port", str(secured),
                           *login], capture_output=True, text=True, timeout=HANG, env=env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jmspy: error: cannot read stats"), lines
    assert lines[0].count(reason) == 1, lines[0]


def _with_stdout_closed(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``jmspy ARGV`` with its stdout a pipe whose reading end is closed before the
    command writes anything (``| head -0``, and the worst case of ``| head -1``): every
    write fails. stderr is kept to look for a traceback."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "jmspy", *argv], stdout=write,
                                stderr=subprocess.PIPE, text=True, cwd=cwd)
    finally:
        os.close(write)
    _, err = proc.communicate(timeout=HANG)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)


@pytest.mark.parametrize(("argv", "code"), [
    (["stat"], CLOSED_PIPE_EXIT),
    (["demo", "--fast", "--messages", "200"], CLOSED_PIPE_EXIT),
    # argparse's own help and version text too, whether a write of it failed at once
    # (argparse drops that error and exits 0) or only the exit flush did
    (["--help"], CLOSED_PIPE_EXIT),
    (["stat", "--help"], CLOSED_PIPE_EXIT),
    (["--version"], CLOSED_PIPE_EXIT),
])
def test_a_closed_pipe_ends_the_command_quietly(
    served: tuple[int, ConnectionFactory], argv: list[str], code: int,
) -> None:
    if argv == ["stat"]:
        argv = ["stat", "--port", str(served[0])]
    done = _with_stdout_closed(*argv)
    assert done.stderr == "", done.stderr  # no traceback, no "Exception ignored"
    assert done.returncode == code


def test_stat_piped_into_head_prints_its_first_line_and_exits_quietly(
    served: tuple[int, ConnectionFactory],
) -> None:
    done = subprocess.run(f"{sys.executable} -m jmspy stat --port {served[0]} | head -1",
                          shell=True, capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("store: none (in memory)"), done.stdout


def _raise_broken_pipe() -> int:
    raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("reader_open", [True, False])
def test_a_broken_pipe_is_called_a_closed_stdout_only_when_stdouts_reader_is_gone(
    monkeypatch: pytest.MonkeyPatch, reader_open: bool,
) -> None:
    """A BrokenPipeError from a socket, while stdout's reader is still there, is a real
    failure and raised on; with the reader gone it is the quiet exit."""
    read, write = os.pipe()
    if not reader_open:
        os.close(read)
    with os.fdopen(write, "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        if reader_open:
            with pytest.raises(BrokenPipeError):
                run_quietly_on_closed_pipe(_raise_broken_pipe)
        else:
            assert run_quietly_on_closed_pipe(_raise_broken_pipe) == CLOSED_PIPE_EXIT
            stdout.write("after the exit: goes to /dev/null\n")
            stdout.flush()  # no error: /dev/null took the pipe's place
        monkeypatch.undo()
    if reader_open:
        os.close(read)


def test_a_broken_pipe_without_a_real_stdout_is_raised_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(BrokenPipeError):
        run_quietly_on_closed_pipe(_raise_broken_pipe)


def test_stat_against_a_port_nobody_listens_on_says_to_start_a_broker(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()  # nothing listens here
    assert main(["stat", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"cannot read stats from 127.0.0.1:{port}" in err
    assert f"start one with `jmspy broker --port {port}`" in err
