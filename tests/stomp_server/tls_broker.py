"""A ``jmspy broker`` configured from TOML, served on a thread, and a raw STOMP-over-TLS
client (the standard library's ``ssl`` and a socket) for the TLS listener's tests."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jmspy.broker_ref.config import load_config
from jmspy.broker_ref.protocols.stomp import runner

#: guards against a hung broker or client only (a failure, not a timing requirement)
HANG = 60.0


@contextmanager
def tls_broker(tmp_path: Path, toml: str, loop: str | None = None) -> Iterator[dict[str, int]]:
    """Serve the config ``toml`` (in memory) until the block ends, on ``loop`` (None: the
    config's, uvloop when installed, as ``jmspy broker``); yields the bound ports as
    {"plain": P, "tls": T} ("plain" missing when the config serves TLS only)."""
    path = tmp_path / "broker.toml"
    path.write_text(toml, encoding="utf-8")
    config = load_config(path)
    config.data_dir = None
    if loop is not None:
        config.loop = loop
    ports: dict[str, int] = {}
    ready = threading.Event()
    failed: list[BaseException] = []
    handles: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def main() -> None:
        stop = asyncio.Event()
        handles.append((asyncio.get_running_loop(), stop))

        def tls_ready(host: str, port: int) -> None:
            ports["tls"] = port
            ready.set()

        def plain_ready(host: str, port: int) -> None:
            if not config.tls.only:
                ports["plain"] = port

        await runner.serve(config, stop, plain_ready, tls_ready)

    def run() -> None:
        try:
            with asyncio.Runner(loop_factory=runner.loop_factory(config.loop)) as run_loop:
                run_loop.run(main())
        except BaseException as exc:  # handed to the test thread
            failed.append(exc)
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(HANG), "the broker did not start"
    if failed:
        raise failed[0]
    try:
        yield ports
    finally:
        loop, stop = handles[0]
        loop.call_soon_threadsafe(stop.set)
        thread.join(HANG)


def tls_section(files: Any, extra: str = "") -> str:
    return (f'[broker]\nport = 0\n[limits]\nheartbeat-ms = 0\n[broker.tls]\nport = 0\n'
            f'cert = "{files.server_cert}"\nkey = "{files.server_key}"\n{extra}')


class RawStomp:
    """STOMP 1.2 frames over one socket (TLS or not): no library between test and wire."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = b""

    def send(self, command: str, body: bytes = b"", **headers: str) -> None:
        lines = "".join(f"{k.replace('_', '-')}:{v}\n" for k, v in headers.items())
        self.sock.sendall(f"{command}\n{lines}\n".encode() + body + b"\x00")

    def read(self) -> tuple[str, dict[str, str], bytes]:
        """The next frame; ("", {}, b"") when the peer closed first."""
        while True:
            self._buffer = self._buffer.lstrip(b"\r\n")
            end = self._buffer.find(b"\x00")
            if end >= 0:
                frame, self._buffer = self._buffer[:end], self._buffer[end + 1:]
                head, _, body = frame.partition(b"\n\n")
                command, *lines = head.decode().split("\n")
                headers = dict(line.split(":", 1) for line in lines if line)
                return command, headers, body
            chunk = self.sock.recv(65536)
            if not chunk:
                return "", {}, b""
            self._buffer += chunk

    def connect(self, **headers: str) -> tuple[str, dict[str, str], bytes]:
        self.send("CONNECT", accept_version="1.2", host="/", heart_beat="0,0", **headers)
        return self.read()

    def close(self) -> None:
        self.sock.close()


def tls_client(port: int, files: Any, *, cert: Path | None = None,
               key: Path | None = None) -> RawStomp:
    """A TLS client trusting the session CA, with a client certificate if given."""
    context = ssl.create_default_context(cafile=str(files.ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    return RawStomp(context.wrap_socket(sock, server_hostname="localhost"))


def plain_client(port: int) -> RawStomp:
    return RawStomp(socket.create_connection(("127.0.0.1", port), timeout=HANG))
