"""Raw bytes to a server over a plain socket, for the fuzz tests of both protocol hosts."""

from __future__ import annotations

import socket

__all__ = ["send_and_read_until_closed"]


def send_and_read_until_closed(host: str, port: int, payload: bytes,
                               timeout: float = 5.0) -> bytes:
    """Send ``payload``, half-close, and return everything the server wrote until it
    closed (a reset or a timeout ends the reading as a close does)."""
    got = bytearray()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            while data := sock.recv(65536):
                got += data
        except (ConnectionError, TimeoutError):
            pass
    return bytes(got)
