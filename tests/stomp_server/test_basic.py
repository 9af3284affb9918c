"""Connect, send, subscribe in each ack mode; receipts; versions."""

from __future__ import annotations

import pytest
from stomp_support import ServerHandle


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_send_subscribe_auto(server: ServerHandle, connect, version: str) -> None:
    conn, lst = connect(version)
    conn.subscribe("/queue/a", id="s1", ack="auto")
    for i in range(5):
        conn.send("/queue/a", f"m{i}", headers={"color": "red"})
    msgs = lst.wait_messages(5)
    assert [m.body for m in msgs] == [f"m{i}" for i in range(5)]
    h = msgs[0].headers
    assert h["destination"] == "/queue/a" and h["subscription"] == "s1"
    assert h["color"] == "red" and h["priority"] == "4" and h["expires"] == "0"
    # redelivered on every MESSAGE, as RabbitMQ sends it; persistent only when true
    assert h["redelivered"] == "false" and "persistent" not in h
    server.wait_stats("a", "messageCount", 0)
