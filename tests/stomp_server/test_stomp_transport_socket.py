"""The stomp:// transport's socket is tuned for small frames."""

from __future__ import annotations

import logging
import socket
from typing import Any

from jmspy import ConnectionFactory


def test_stomp_transport_turns_off_nagle_so_acks_are_not_held_40ms(server: Any) -> None:
    with ConnectionFactory(f"stomp://{server.host}:{server.port}").create_connection() as conn:
        sock = conn._transport._conn.transport.socket  # type: ignore[attr-defined]
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_closing_does_not_race_stomp_py_to_the_socket(server: Any, caplog: Any) -> None:
    """After the DISCONNECT receipt the broker closes its end, and stomp.py's I/O thread
    closes the socket while ``close()`` shuts it down: stomp.py then logged a warning
    ("unable to issue SHUT_RDWR ... Bad file descriptor") on a clean close."""
    caplog.set_level(logging.WARNING)
    factory = ConnectionFactory(f"stomp://{server.host}:{server.port}")
    for _ in range(40):  # the race was lost in about one close of four
        conn = factory.create_connection()
        conn.start()
        conn.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == []
