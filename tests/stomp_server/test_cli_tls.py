"""``jmspy broker --tls-port`` as a real subprocess, on each event loop: the listening
lines, a TLS round trip, TLS only, and startup errors that name the file (no traceback)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from brokers import free_port
from tls_broker import HANG, plain_client, tls_client


def config(tmp_path: Path, files: Any, extra: str = "") -> Path:
    path = tmp_path / "broker.toml"
    path.write_text(f'[limits]\nheartbeat-ms = 0\n[broker.tls]\ncert = "{files.server_cert}"\n'
                    f'key = "{files.server_key}"\n{extra}', encoding="utf-8")
    return path


@contextmanager
def broker(*args: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``jmspy broker --in-memory ARGS``; yields the process and its first stdout lines
    (both listening lines), and stops it (SIGTERM) after."""
    proc = subprocess.Popen([sys.executable, "-m", "jmspy", "broker", "--in-memory", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]
        if "over TLS" not in lines[0]:
            lines.append(proc.stdout.readline())
        yield proc, lines
    finally:
        proc.terminate()
        proc.communicate(timeout=HANG)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_tls_port_serves_beside_the_plain_port_and_both_lines_are_printed(
        tmp_path: Path, tls_ca: Any, loop: str) -> None:
    port, tls_port = free_port(), free_port()
    with broker("--config", str(config(tmp_path, tls_ca)), "--port", str(port),
                "--tls-port", str(tls_port), "--loop", loop) as (_, lines):
        assert lines[0].startswith(f"jmspy broker listening on 127.0.0.1:{port} (in memory")
        assert lines[1].strip() == (f"jmspy broker listening on 127.0.0.1:{tls_port} for "
                                    "STOMP over TLS (no client certificates)")
        secure = tls_client(tls_port, tls_ca)
        assert secure.connect()[0] == "CONNECTED"
        secure.send("SEND", b"cli tls", destination="/queue/cli", receipt="r")
        assert secure.read()[0] == "RECEIPT"
        plain = plain_client(port)
        assert plain.connect()[0] == "CONNECTED"
        plain.send("SUBSCRIBE", destination="/queue/cli", id="s", ack="auto")
        assert plain.read()[2] == b"cli tls"
        secure.close()
        plain.close()


def test_tls_only_prints_one_line_with_the_tls_port_first(tmp_path: Path, tls_ca: Any) -> None:
    tls_port = free_port()
    extra = f'ca = "{tls_ca.ca}"\nrequire-client-cert = true\n'
    with broker("--config", str(config(tmp_path, tls_ca, extra)), "--tls-port",
                str(tls_port), "--tls-only") as (_, lines):
        assert re.fullmatch(
            rf"jmspy broker listening on 127\.0\.0\.1:{tls_port} for STOMP over TLS "
            r"\(client certificates required; in memory: messages are lost at exit\)\n",
            lines[0]), lines
        client = tls_client(tls_port, tls_ca, cert=tls_ca.client_cert, key=tls_ca.client_key)
        assert client.connect()[0] == "CONNECTED"
        client.close()


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jmspy", "broker", "--in-memory", *args],
                          capture_output=True, text=True, timeout=HANG)


def test_a_key_not_matching_the_certificate_fails_at_startup_naming_the_file(
        tmp_path: Path, tls_ca: Any) -> None:
    path = tmp_path / "broker.toml"
    path.write_text(f'[broker.tls]\ncert = "{tls_ca.server_cert}"\n'
                    f'key = "{tls_ca.client_key}"\nport = 0\n', encoding="utf-8")
    out = run("--config", str(path), "--port", "0")
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr
    assert (f"jmspy: error: {path}: [broker.tls] key: {tls_ca.client_key} is not the private "
            f"key of {tls_ca.server_cert}") in out.stderr
    assert out.stdout == ""  # never said it listens


def test_tls_port_without_a_tls_table_is_a_clear_error() -> None:
    out = run("--tls-port", "61614")
    assert out.returncode == 2
    assert "--tls-port needs a TLS listener configured: add a [broker.tls] table" in out.stderr


@pytest.mark.parametrize("value", ["0x", "70000", "-1"])
def test_tls_port_out_of_range_is_refused_by_the_parser(value: str) -> None:
    out = run("--tls-port", value)
    assert out.returncode == 2
    assert "--tls-port" in out.stderr and "1-65535" in out.stderr


def test_tls_port_equal_to_the_plain_port_is_refused(tmp_path: Path, tls_ca: Any) -> None:
    out = run("--config", str(config(tmp_path, tls_ca)), "--port", "7001", "--tls-port",
              "7001")
    assert out.returncode == 2
    assert "--port and --tls-port are both 7001" in out.stderr


def test_port_with_tls_only_is_refused(tmp_path: Path, tls_ca: Any) -> None:
    out = run("--config", str(config(tmp_path, tls_ca)), "--port", "7002", "--tls-only")
    assert out.returncode == 2
    assert "--tls-only turns off; give --tls-port instead" in out.stderr
