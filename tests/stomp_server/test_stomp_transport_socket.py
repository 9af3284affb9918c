"""The stomp:// transport's socket is tuned for small frames."""

from __future__ import annotations

import socket
from typing import Any

from jmspy import ConnectionFactory


def test_stomp_transport_turns_off_nagle_so_acks_are_not_held_40ms(server: Any) -> None:
    with ConnectionFactory(f"stomp://{server.host}:{server.port}").create_connection() as conn:
        sock = conn._transport._conn.transport.socket  # type: ignore[attr-defined]
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
