"""Wildcard topic subscriptions over STOMP on the jmspy broker, with unmodified stomp.py."""

from __future__ import annotations

import time

from polling import wait_until
from stomp_support import ServerHandle


def test_pattern_subscription_gets_matching_topics(server: ServerHandle, connect) -> None:
    conn, lst = connect("1.2")
    conn.subscribe("/topic/prices.*", id="one")
    conn.subscribe("/topic/prices.>", id="all")
    for name in ("prices.eu", "prices.eu.spot", "news.eu"):
        conn.send(f"/topic/{name}", name)
    msgs = lst.wait_messages(3)
    time.sleep(0.05)
    got = sorted((m.headers["subscription"], m.headers["destination"]) for m in lst.messages)
    assert got == [("all", "/topic/prices.eu"), ("all", "/topic/prices.eu.spot"),
                   ("one", "/topic/prices.eu")]
    assert len(msgs) == 3


def test_send_to_a_pattern_gets_an_error_naming_the_fix(server: ServerHandle, connect) -> None:
    conn, lst = connect("1.2")
    conn.send("/topic/prices.*", "x", receipt="r")
    wait_until(lambda: lst.errors, 5)
    assert lst.errors, "no ERROR frame for a send to a wildcard topic"
    assert "concrete topic" in lst.errors[0].headers.get("message", "") + lst.errors[0].body
