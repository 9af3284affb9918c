"""``jmspy worker`` as a real subprocess against ``jmspy broker`` (also a subprocess, on a
free loopback port): every message handled exactly once, a SIGTERM that loses nothing, the
flow-limit warning, process workers, one-line errors, and a --help that lists every
option. The listeners live in tests/cli_worker_listeners.py, imported by the worker (and
its --processes children) from its working directory, as ``celery worker`` does."""

from __future__ import annotations

import os
import re
import signal
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


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    """``jmspy broker --in-memory`` on a free port, for the whole module (each test uses
    its own queue)."""
    with jmspy_broker(TESTS) as port:
        yield port


def fill(port: int, queue: str, n: int) -> None:
    with ConnectionFactory(f"stomp://127.0.0.1:{port}").create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(Queue(queue))
        for i in range(n):
            producer.send(session.create_text_message(str(i)))


def drain(port: int, queue: str) -> list[str]:
    """Consume what is left on ``queue``: the texts."""
    texts: list[str] = []
    with ConnectionFactory(f"stomp://127.0.0.1:{port}").create_connection() as conn:
        consumer = conn.create_session().create_consumer(Queue(queue))
        conn.start()
        # 2 s without a message means the queue is empty (nothing else produces to it)
        while (m := consumer.receive(2.0)) is not None:
            texts.append(m.text)
    return texts


def worker_args(port: int, queue: str, listener: str, *options: str) -> list[str]:
    return [sys.executable, "-m", "jmspy", "worker", f"stomp://127.0.0.1:{port}", queue,
            f"cli_worker_listeners:{listener}", *options]


def worker_env(log: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "WORKER_LOG": str(log), **extra}


def handled(log: Path) -> list[tuple[str, int]]:
    """(text, pid) of each message the listener handled."""
    if not log.exists():
        return []
    return [(text, int(pid)) for text, pid, _ in
            (line.split() for line in log.read_text().splitlines())]


def summary(stdout: str) -> dict[str, int]:
    line = stdout.strip().splitlines()[-1]
    assert line.startswith("jmspy worker: "), stdout
    counts = {name: int(n) for n, name in re.findall(r"(\d+) ([a-z-]+)[,;]", line)}
    peak = re.search(r"peak concurrency (\d+)/", line)
    assert peak is not None, line
    counts["peak"] = int(peak.group(1))
    return counts


def test_a_worker_handles_50_messages_exactly_once_then_stops_at_count(
        port: int, tmp_path: Path) -> None:
    fill(port, "jobs", 50)
    log = tmp_path / "handled.log"
    done = subprocess.run(worker_args(port, "jobs", "record", "--pool", "4", "--count", "50"),
                          capture_output=True, text=True, cwd=TESTS, env=worker_env(log),
                          timeout=HANG)
    assert done.returncode == 0, done.stderr
    counts = summary(done.stdout)
    assert counts["processed"] == 50 and counts["failed"] == 0, done.stdout
    assert 1 <= counts["peak"] <= 4
    texts = [text for text, _ in handled(log)]
    assert sorted(map(int, texts)) == list(range(50))  # each once: none twice, none missed
    assert "Traceback" not in done.stderr
    assert drain(port, "jobs") == []


def test_sigterm_with_messages_in_flight_stops_gracefully_and_loses_nothing(
        port: int, tmp_path: Path) -> None:
    fill(port, "slowjobs", 40)
    log = tmp_path / "handled.log"
    proc = subprocess.Popen(
        worker_args(port, "slowjobs", "record", "--pool", "4", "--status-interval", "0.2"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=TESTS,
        env=worker_env(log, WORKER_SLEEP="0.2"))
    status = re.compile(r"processed (\d+)  [\d.,]+ msgs/s  busy \d/4  in flight \d+  "
                        r"failed 0  dead-lettered 0$")
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        # the worker's stderr, line by line (not a TTY: one status line per interval),
        # until a status line counts 4 processed: the pool is then busy with the next ones
        while (line := proc.stderr.readline()) and not (
                (m := status.match(line.rstrip("\n"))) and int(m.group(1)) >= 4):
            seen.append(line)
        assert line, f"the worker ended early: {''.join(seen)}"
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=HANG)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert "jmspy worker: stopping: waiting up to 30 s" in stderr and "Traceback" not in stderr
    assert "\r" not in stderr
    counts = summary(stdout)
    done = [text for text, _ in handled(log)]
    assert counts["processed"] == len(done) >= 4  # the in-flight ones finished and counted
    rest = drain(port, "slowjobs")  # what the worker had not taken, or took and gave back
    assert sorted(map(int, done + rest)) == list(range(40))  # none lost, none twice


def test_a_flow_limit_below_the_pool_size_warns_naming_both_numbers(
        port: int, tmp_path: Path) -> None:
    fill(port, "flow", 6)
    log = tmp_path / "handled.log"
    done = subprocess.run(
        worker_args(port, "flow", "record", "--pool", "8", "--count", "6",
                    "--property", "imqConsumerFlowLimit=2"),
        capture_output=True, text=True, cwd=TESTS, env=worker_env(log), timeout=HANG)
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "reducing the pool" in line]
    assert len(warning) == 1, done.stderr
    assert "imqConsumerFlowLimit=2" in warning[0] and "maxPoolSize=8" in warning[0]
    assert summary(done.stdout)["peak"] <= 2


def test_process_workers_handle_every_message_in_child_processes(
        port: int, tmp_path: Path) -> None:
    fill(port, "crunch", 20)
    log = tmp_path / "handled.log"
    proc = subprocess.Popen(
        worker_args(port, "crunch", "burn", "--pool", "2", "--processes", "--count", "20"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=TESTS,
        env=worker_env(log))
    stdout, stderr = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, stderr
    assert summary(stdout)["processed"] == 20
    rows = handled(log)
    assert sorted(int(text) for text, _ in rows) == list(range(20))
    pids = {pid for _, pid in rows}
    assert proc.pid not in pids and 1 <= len(pids) <= 2  # in the pool's 2 children


@pytest.mark.parametrize(("listener", "options", "code", "says"), [
    ("nosuchmodule:f", [], 2, "cannot import 'nosuchmodule'"),
    ("cli_worker_listeners:record", ["--property", "imqNoSuch=1"], 2,
     "unknown connection factory property 'imqNoSuch'"),
    ("cli_worker_listeners:record", ["--property", "imqConsumerFlowLimit=many"], 2,
     "imqConsumerFlowLimit must be an integer"),
    ("cli_worker_listeners:record", ["--url", "nosuch://x"], 2, "no transport for URL scheme"),
    ("cli_worker_listeners:record", ["--url", "down"], 1, "cannot connect"),
    # its own vm:// broker would be new, empty and out of every other process's reach
    ("cli_worker_listeners:record", ["--url", "vm://work"], 2,
     "vm://work: a vm:// broker exists only inside the process that starts it"),
    ("cli_worker_listeners:record", ["--url", "vm://work"], 2, "Run `jmspy broker`"),
    ("cli_worker_listeners:record", ["--url", "stomp://127.0.0.1:70000"], 2,
     "port 70000 is out of range: use 1-65535"),
])
def test_mistakes_exit_nonzero_with_one_clear_line_and_no_traceback(
        listener: str, options: list[str], code: int, says: str) -> None:
    url = "stomp://127.0.0.1:1"
    if options[:1] == ["--url"]:
        url = f"stomp://127.0.0.1:{free_port()}" if options[1] == "down" else options[1]
        options = []
    done = subprocess.run(
        [sys.executable, "-m", "jmspy", "worker", url, "q", listener, *options],
        capture_output=True, text=True, cwd=TESTS, timeout=HANG)
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert lines[0].startswith("jmspy worker: error: ")


def test_help_lists_every_option() -> None:
    done = subprocess.run([sys.executable, "-m", "jmspy", "worker", "--help"],
                          capture_output=True, text=True, cwd=TESTS, timeout=HANG)
    assert done.returncode == 0
    for option in ("URL", "DESTINATION", "LISTENER", "--pool", "--processes", "--selector",
                   "--topic", "--durable", "--client-id", "--prefetch",
                   "--redelivery-attempts", "--redelivery-interval", "--no-dmq", "--dlq",
                   "--steady", "--user", "--password", "--property", "--count",
                   "--status-interval", "--stop-timeout"):
        assert re.search(rf"^\s+{re.escape(option)}\b.*\S", done.stdout, re.M), option
