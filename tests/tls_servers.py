"""Small loopback servers for the TLS client tests: a TLS listener that presents a chosen
certificate (and may require a client's), and plain TCP listeners that close on or sit
silent through a TLS client's hello.

Certificate checks happen in the handshake, so these are enough to prove the client's
error for every failure of the handshake without a broker: the protocol never starts.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["plain_server", "tls_server"]


def _serve(listener: socket.socket, handle: object) -> threading.Thread:
    def run() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # the listener was closed: the test is over
            threading.Thread(target=handle, args=(conn,), daemon=True).start()  # type: ignore[arg-type]

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@contextmanager
def tls_server(cert: Path, key: Path, *, client_ca: Path | None = None) -> Iterator[int]:
    """A TLS listener on 127.0.0.1 presenting ``cert``; with ``client_ca`` it requires a
    client certificate signed by that CA. Each connection is read until it closes. The
    port is yielded."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(client_ca)
    listener = socket.create_server(("127.0.0.1", 0))

    def handle(conn: socket.socket) -> None:
        try:
            with ctx.wrap_socket(conn, server_side=True) as tls:
                while tls.recv(4096):
                    pass
        except OSError:
            pass  # the handshake failed: what the client must explain
        finally:
            conn.close()

    _serve(listener, handle)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@contextmanager
def plain_server(*, silent: bool = False) -> Iterator[int]:
    """A plain TCP listener on 127.0.0.1: it reads what a client sends and closes the
    connection, or (``silent``) reads and never answers nor closes until the client
    does. The port is yielded."""
    listener = socket.create_server(("127.0.0.1", 0))

    def handle(conn: socket.socket) -> None:
        with conn:
            try:
                while conn.recv(4096) and silent:
                    pass
            except OSError:
                pass

    _serve(listener, handle)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
