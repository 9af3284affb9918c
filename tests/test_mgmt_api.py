"""The management API at work on a real ``jmspy broker``: browse paging, purge, move,
delete, dead-letter retry, connections with their consumers' windows, and a close that
ends a real STOMP client's connection."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from mgmt_broker import DEAD_LETTERS, HANG, Running, quote, running_broker
from polling import wait_until
from prometheus_client.parser import text_string_to_metric_families

from jmspy import ConnectionFactory, Session


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_broker(tmp_path_factory.mktemp("mgmt"), DEAD_LETTERS) as running:
        yield running



def _browse(broker: Running, queue: str, offset: int = 0, limit: int = 50) -> dict:
    status, page = broker.call("GET", f"/api/queues/{quote(queue)}/messages"
                               f"?offset={offset}&limit={limit}")
    assert status == 200, page
    return page


def test_browse_pages(broker: Running) -> None:
    broker.send("paged", 7)
    first, last = _browse(broker, "paged", 0, 5), _browse(broker, "paged", 5, 5)
    assert first["total"] == last["total"] == 7
    bodies = [m["body"] for m in first["messages"] + last["messages"]]
    assert bodies == [f"paged-{i}" for i in range(7)]
    assert first["messages"][0]["bodyEncoding"] == "text"
    status, answer = broker.call("GET", "/api/queues/paged/messages?limit=0")
    assert status == 400 and "between 1 and" in answer["message"]
    status, answer = broker.call("GET", "/api/queues/nowhere/messages")
    assert status == 404 and "nowhere" in answer["message"]


def test_destinations_count_and_purge(broker: Running) -> None:
    broker.send("purged", 4)
    status, answer = broker.call("GET", "/api/destinations")
    assert status == 200
    row = next(d for d in answer["destinations"] if d["name"] == "purged")
    assert row["messageCount"] == 4 and row["enqueued"] == 4
    status, answer = broker.call("DELETE", "/api/queues/purged/messages")
    assert (status, answer["removed"]) == (200, 4), answer
    assert _browse(broker, "purged")["total"] == 0
    status, stats = broker.call("GET", "/api/destinations/queue/purged")
    assert status == 200 and stats["messageCount"] == 0


def test_delete_and_move_one(broker: Running) -> None:
    broker.send("source", 3)
    broker.send("target", 1)
    ids = [m["messageId"] for m in _browse(broker, "source")["messages"]]
    status, _ = broker.call("DELETE", f"/api/queues/source/messages/{quote(ids[0])}")
    assert status == 200
    status, answer = broker.call("POST", f"/api/queues/source/messages/{quote(ids[1])}/move",
                                 {"to": "target"})
    assert status == 200, answer
    assert [m["body"] for m in _browse(broker, "source")["messages"]] == ["source-2"]
    assert [m["body"] for m in _browse(broker, "target")["messages"]] == ["target-0", "source-1"]
    status, answer = broker.call("DELETE", f"/api/queues/source/messages/{quote(ids[0])}")
    assert status == 404 and "browse the queue" in answer["message"]
    status, answer = broker.call("POST", f"/api/queues/source/messages/{quote(ids[2])}/move",
                                 {"to": "no-such-queue"})
    assert status == 404 and "no-such-queue" in answer["message"]
    status, answer = broker.call("POST", f"/api/queues/source/messages/{quote(ids[2])}/move",
                                 {"too": "target"})
    assert status == 400 and '"to"' in answer["message"]
    assert _browse(broker, "source")["total"] == 1  # refused moves left it


def test_retry_moves_dead_letters_back(broker: Running) -> None:
    broker.dead_letter_one("retry.jobs")  # to the DLQ
    dlq = _browse(broker, "DLQ")
    assert [m["body"] for m in dlq["messages"]] == ["retry.jobs-0"]
    assert dlq["messages"][0]["properties"]["JMS_jmspy_OriginalDestination"] == "retry.jobs"
    status, answer = broker.call("POST", "/api/queues/DLQ/retry")
    assert status == 200, answer
    assert list(answer["moved"].values()) == ["retry.jobs"]
    assert _browse(broker, "DLQ")["total"] == 0
    back = _browse(broker, "retry.jobs")["messages"]
    assert [m["body"] for m in back] == ["retry.jobs-0"]
    assert "JMS_jmspy_OriginalDestination" not in back[0]["properties"]


def test_connections_and_close(broker: Running) -> None:
    broker.send("watched", 3)
    factory = ConnectionFactory(f"stomp://127.0.0.1:{broker.stomp_port}",
                                imqConsumerFlowLimit=7, imqConsumerFlowThreshold=40)
    conn = factory.create_connection(client_id="watcher")
    closed = threading.Event()
    conn.set_exception_listener(lambda exc: closed.set())
    try:
        conn.start()
        session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(session.create_queue("watched"))
        assert consumer.receive(HANG) is not None
        status, answer = broker.call("GET", "/api/connections")
        assert status == 200
        mine = next(c for c in answer["connections"] if c["clientId"] == "watcher")
        (window,) = mine["consumers"]
        assert window["queue"] == "watched"
        assert window["delivering"] >= 1 and window["limitSetBy"] == "client"
        # the client's own window, as the STOMP host keeps it from the SUBSCRIBE
        assert (window["limit"], window["clientLimit"], window["threshold"],
                window["askedBy"]) == (7, 7, 40, "jmspy-flow-limit")
        assert 1 <= window["unconsumed"] <= 3
        status, answer = broker.call("DELETE", f"/api/connections/{mine['id']}")
        assert status == 200, answer
        assert closed.wait(HANG), "the client never heard its connection close"
        status, answer = broker.call("GET", "/api/connections")
        assert all(c["clientId"] != "watcher" for c in answer["connections"])
    finally:
        try:
            conn.close()
        except Exception:  # already closed by the broker
            pass
    assert _browse(broker, "watched")["total"] == 3  # unacked ones went back


def test_metrics_parse_with_connections(broker: Running) -> None:
    broker.send("metered", 2)
    status, text = broker.call("GET", "/metrics")
    assert status == 200
    samples = {(s.name, s.labels.get("destination")): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("jmspy_destination_messages", "metered")] == 2
    assert ("jmspy_http_logins_refused_total", None) in samples
    assert ("jmspy_broker_connections", None) in samples


def test_unknown_route_is_json(broker: Running) -> None:
    status, answer = broker.call("GET", "/api/nothing")
    assert status == 404 and answer["error"]


def test_closing_an_mqtt_connection_ends_its_socket_with_the_reason(tmp_path: Path) -> None:
    """The management API's close reaches the MQTT host too: the client gets a v5
    DISCONNECT 0x98 (administrative action) and the socket closes."""
    import paho.mqtt.client as paho

    with running_broker(tmp_path, mqtt=True) as running:
        assert running.mqtt_port is not None
        gone = threading.Event()
        reasons: list[Any] = []

        def on_disconnect(client: Any, userdata: Any, flags: Any, reason: Any,
                          props: Any) -> None:
            reasons.append(reason)
            gone.set()

        client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="device-7",
                             protocol=paho.MQTTv5)
        client.on_disconnect = on_disconnect

        def ids() -> set[int]:
            return {c["id"] for c in running.call("GET", "/api/connections")[1]["connections"]}

        before = ids()
        client.connect("127.0.0.1", running.mqtt_port)
        client.loop_start()
        try:
            assert wait_until(lambda: ids() - before, HANG)
            (mine,) = ids() - before
            status, answer = running.call("DELETE", f"/api/connections/{mine}")
            assert status == 200, answer
            assert gone.wait(HANG), "the MQTT client never heard its connection close"
            assert getattr(reasons[0], "value", reasons[0]) == 0x98
            assert mine not in ids()
        finally:
            client.loop_stop()
