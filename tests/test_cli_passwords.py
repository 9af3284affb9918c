"""The CLIs that log in to a broker (``jmspy stat``, ``jmspy worker``) take the password
from ``--password``, ``--password-file PATH`` or the ``JMSPY_PASSWORD`` environment
variable, in that order of precedence, and refuse a password file they cannot use with
one line naming it. Real subprocesses against ``jmspy broker`` with security on (also a
subprocess, on a free loopback port): a password reaches the broker exactly when the
login succeeds."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import jmspy_broker
from brokers import free_port

from jmspy import ConnectionFactory, Queue

TESTS = Path(__file__).resolve().parent
#: guards against a hung subprocess only (a failure, not a timing requirement)
HANG = 300
RIGHT, WRONG = "alice-pw", "not-alices-pw"
CONFIG = f"""
[security]
[security.users.alice]
password = "{RIGHT}"
roles = ["ops"]

[[security.permissions]]
match = "#"
send = ["ops"]
consume = ["ops"]
admin = ["ops"]
"""


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """``jmspy broker --in-memory`` with one user, alice, for the whole module. Only two
    tests log in with a wrong password, below the failed-login throttle's first delay."""
    with jmspy_broker(tmp_path_factory.mktemp("secured"), config=CONFIG) as port:
        yield port


def _env(password: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JMSPY_PASSWORD"}
    if password is not None:
        env["JMSPY_PASSWORD"] = password
    return env


def _file(tmp_path: Path, text: str, name: str = "pw") -> str:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def stat(port: int, *options: str, env_password: str | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jmspy", "stat", "--port", str(port), "--user", "alice",
         *options], capture_output=True, text=True, timeout=HANG, env=_env(env_password),
        cwd="/tmp" if Path("/tmp").is_dir() else None)


def _logged_in(done: subprocess.CompletedProcess[str]) -> bool:
    if done.returncode == 0:
        assert "destination" in done.stdout, done.stdout
        return True
    assert done.returncode == 1 and "authentication failed" in done.stderr, done.stderr
    return False


def test_stat_reads_the_password_from_a_file(port: int, tmp_path: Path) -> None:
    assert _logged_in(stat(port, "--password-file", _file(tmp_path, RIGHT + "\n")))


def test_stat_reads_the_password_from_the_environment(port: int) -> None:
    assert _logged_in(stat(port, env_password=RIGHT))


def test_an_explicit_password_wins_over_the_file_and_the_environment(
    port: int, tmp_path: Path,
) -> None:
    assert _logged_in(stat(port, "--password", RIGHT, "--password-file",
                           _file(tmp_path, WRONG), env_password=WRONG))
    assert not _logged_in(stat(port, "--password", WRONG, "--password-file",
                               _file(tmp_path, RIGHT), env_password=RIGHT))


def test_the_file_wins_over_the_environment(port: int, tmp_path: Path) -> None:
    assert _logged_in(stat(port, "--password-file", _file(tmp_path, RIGHT),
                           env_password=WRONG))
    assert not _logged_in(stat(port, "--password-file", _file(tmp_path, WRONG),
                               env_password=RIGHT))


@pytest.mark.parametrize(("make", "says"), [
    (lambda d: str(d / "missing"), "cannot read it (No such file or directory)"),
    (lambda d: str(d), "cannot read it (Is a directory)"),
    (lambda d: _file(d, ""), "is empty"),
    (lambda d: _file(d, "\n"), "is empty"),
    (lambda d: _file(d, "one\ntwo\n"), "holds more than one line"),
])
def test_stat_refuses_a_password_file_it_cannot_use_before_connecting(
    tmp_path: Path, make: object, says: str,
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    done = stat(free_port(), "--password-file", path, env_password=RIGHT)  # nobody listens
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"jmspy: error: --password-file {path}") and says in line, line
    assert "cannot read stats" not in line  # refused before any connection was tried


def test_the_help_of_each_cli_names_every_source_and_the_precedence() -> None:
    for command in ("stat", "worker"):
        done = subprocess.run([sys.executable, "-m", "jmspy", command, "--help"],
                              capture_output=True, text=True, timeout=HANG)
        assert done.returncode == 0
        text = " ".join(done.stdout.split())
        assert "--password-file PATH" in text and "$JMSPY_PASSWORD" in text, command
        assert "precedence: --password, then --password-file, then $JMSPY_PASSWORD" in text


def _fill(port: int, queue: str, n: int) -> None:
    factory = ConnectionFactory(f"stomp://127.0.0.1:{port}", imqDefaultUsername="alice",
                                imqDefaultPassword=RIGHT)
    with factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(Queue(queue))
        for i in range(n):
            producer.send(session.create_text_message(str(i)))


def worker(port: int, queue: str, log: Path, *options: str,
           env_password: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**_env(env_password), "WORKER_LOG": str(log)}
    return subprocess.run(
        [sys.executable, "-m", "jmspy", "worker", f"stomp://127.0.0.1:{port}", queue,
         "cli_worker_listeners:record", "--user", "alice", "--count", "3", *options],
        capture_output=True, text=True, cwd=TESTS, env=env, timeout=HANG)


@pytest.mark.parametrize("source", ["file", "environment"])
def test_a_worker_logs_in_with_the_password_from_a_file_or_the_environment(
    port: int, tmp_path: Path, source: str,
) -> None:
    queue = f"jobs-{source}"
    _fill(port, queue, 3)
    log = tmp_path / "handled.log"
    options = ["--password-file", _file(tmp_path, RIGHT)] if source == "file" else []
    done = worker(port, queue, log, *options,
                  env_password=RIGHT if source == "environment" else None)
    assert done.returncode == 0, done.stderr
    assert sorted(line.split()[0] for line in log.read_text().splitlines()) == ["0", "1", "2"]


def test_a_worker_refuses_an_unreadable_password_file_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    done = worker(free_port(), "q", tmp_path / "log", "--password-file", str(missing),
                  env_password=RIGHT)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"jmspy worker: error: --password-file {missing}: cannot read it (No such file or "
        "directory); give a readable file holding the password on one line"]
