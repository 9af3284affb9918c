"""Selectors, scheduled delivery, durable subscriptions, temp queues and stats over the wire."""

from __future__ import annotations

import json
import time

import pytest
from polling import wait_until
from stomp_support import ServerHandle


def test_selector_header(server: ServerHandle, connect) -> None:
    conn, lst = connect("1.2")
    conn.subscribe("/queue/sel", id="s", headers={"selector": "color = 'red'"})
    for color in ("blue", "red", "green", "red"):
        conn.send("/queue/sel", color, headers={"color": color})
    msgs = lst.wait_messages(2)
    time.sleep(0.05)
    assert [m.body for m in lst.messages] == ["red", "red"] == [m.body for m in msgs]
    assert server.stats("sel")["messageCount"] == 2


def test_scheduled_delivery_via_header(server: ServerHandle, connect) -> None:
    conn, lst = connect("1.2")
    conn.subscribe("/queue/later", id="s")
    started = time.monotonic()
    conn.send("/queue/later", "amq", headers={"AMQ_SCHEDULED_DELAY": "300"})
    conn.send("/queue/later", "jmspy", headers={"jmspy-delivery-delay": "150"}, receipt="r")
    lst.wait_receipt("r")
    assert server.stats("later")["scheduledCount"] == 2
    msgs = lst.wait_messages(2)
    assert time.monotonic() - started >= 0.29
    assert [m.body for m in msgs] == ["jmspy", "amq"]


def test_durable_subscription_across_reconnect(server: ServerHandle, connect) -> None:
    sub, _ = connect("1.2", **{"client-id": "app1"})
    sub.subscribe("/topic/news", id="d", ack="client-individual",
                  headers={"activemq.subscriptionName": "feed"})
    sub.disconnect()
    pub, plst = connect("1.2")
    for i in range(3):
        pub.send("/topic/news", f"n{i}")
    pub.send("/queue/probe", "x", receipt="sent")
    plst.wait_receipt("sent")
    sub2, lst2 = connect("1.1", **{"client-id": "app1"})
    sub2.subscribe("/topic/news", id="d2", ack="auto",
                   headers={"activemq.subscriptionName": "feed"})
    assert [m.body for m in lst2.wait_messages(3)] == ["n0", "n1", "n2"]
    sub2.unsubscribe("d2", headers={"activemq.subscriptionName": "feed"}, receipt="gone")
    lst2.wait_receipt("gone")
    assert not any(n.startswith("sub://") for n in server.call(server.broker.subscription_names))


def test_temp_queue_reply_to(server: ServerHandle, connect) -> None:
    requester, rlst = connect("1.2")
    responder, slst = connect("1.2")
    responder.subscribe("/queue/service", id="svc")
    requester.subscribe("/temp-queue/replies", id="r")
    requester.send("/queue/service", "ping", headers={"reply-to": "/temp-queue/replies"})
    req = slst.wait_messages(1)[0]
    assert req.headers["reply-to"].startswith("/remote-temp-queue/")
    responder.send(req.headers["reply-to"], "pong")
    reply = rlst.wait_messages(1)[0]
    assert reply.body == "pong" and reply.headers["destination"] == "/temp-queue/replies"


def test_stats_over_the_wire(server: ServerHandle, connect) -> None:
    conn, lst = connect("1.2")
    conn.send("/queue/counted", "a")
    conn.send("/queue/counted", "b")
    conn.subscribe("/temp-queue/stats", id="st")
    conn.send("/jmspy/stats", "", headers={"reply-to": "/temp-queue/stats"})
    rows = json.loads(lst.wait_messages(1)[0].body)
    by_name = {r["name"]: r for r in rows}
    assert by_name["counted"]["messageCount"] == 2
    assert by_name["counted"]["kind"] == "queue"


#: The two ways a SEND names its property types: jmspy's ``jmspy-jms`` header (what jmspy
#: clients send) and ``jmspy-ptypes`` (earlier jmspy clients; raw clients may send it).
TYPED_HEADERS = [{"jmspy-jms": "1;1700000000000;;pick=i,qty=f,ok=b;ID:typed-1"},
                 {"jmspy-ptypes": "pick=i,qty=f,ok=b"}]


@pytest.mark.parametrize("typed", TYPED_HEADERS, ids=["jmspy-jms", "jmspy-ptypes"])
def test_typed_properties_make_numeric_selectors_match(
    server: ServerHandle, connect, typed: dict[str, str]
) -> None:
    """Properties whose types the SEND names are stored typed: ``pick = 1`` and
    ``qty > 10`` compare numbers, ``ok = TRUE`` a boolean; the header goes out again so
    receivers can restore the types."""
    conn, lst = connect("1.2")
    conn.subscribe("/queue/typed", id="s",
                   headers={"selector": "pick = 1 AND qty > 10.5 AND ok = TRUE"})
    conn.send("/queue/typed", "no", headers={**typed, "pick": "2", "qty": "11.0", "ok": "true"})
    conn.send("/queue/typed", "yes", headers={**typed, "pick": "1", "qty": "12.25",
                                              "ok": "true"})
    conn.send("/queue/typed", "small", headers={**typed, "pick": "1", "qty": "9.5",
                                                "ok": "true"})
    msgs = lst.wait_messages(1)
    time.sleep(0.1)
    assert [m.body for m in lst.messages] == ["yes"] == [m.body for m in msgs]
    got = msgs[0].headers
    assert (got["pick"], got["qty"], got["ok"]) == ("1", "12.25", "true")
    assert all(got[name] == value for name, value in typed.items())


def test_untyped_properties_stay_strings(server: ServerHandle, connect) -> None:
    """A raw STOMP client sends no ``jmspy-ptypes``: its properties are strings, so a
    numeric comparison does not match them and a string one does."""
    conn, lst = connect("1.2")
    conn.subscribe("/queue/untyped-n", id="n", headers={"selector": "pick = 1"})
    conn.subscribe("/queue/untyped-s", id="s", headers={"selector": "pick = '1'"})
    conn.send("/queue/untyped-n", "number?", headers={"pick": "1"})
    conn.send("/queue/untyped-s", "string", headers={"pick": "1"})
    msgs = lst.wait_messages(1)
    time.sleep(0.1)
    assert [m.body for m in lst.messages] == ["string"] == [m.body for m in msgs]
    assert server.stats("untyped-n")["messageCount"] == 1  # kept for other consumers


@pytest.mark.parametrize("typed", [{"jmspy-jms": "1;1700000000000;;n=i;ID:bad-1"},
                                   {"jmspy-ptypes": "n=i"}], ids=["jmspy-jms", "jmspy-ptypes"])
def test_ptypes_contradicting_a_value_is_an_error(
    server: ServerHandle, connect, typed: dict[str, str]
) -> None:
    conn, lst = connect("1.2")
    conn.send("/queue/badtype", "x", headers={**typed, "n": "twelve"}, receipt="r")
    wait_until(lambda: lst.errors, 5)
    assert lst.errors, "no ERROR frame for a property that is not what jmspy-ptypes says"
    text = lst.errors[0].headers.get("message", "") + lst.errors[0].body
    header = next(iter(typed))
    assert header in text and "n" in text and "integer" in text and "twelve" in text
