"""The MQTT host and a group-committing store (``jmspy broker --data-dir``): no PUBACK
leaves before the commit that keeps its message, and a commit that loses a client's
messages (a full disk) ends that client's connection without their PUBACKs -- a v5
client is told why (DISCONNECT 0x80) -- so it sends them again, while the other clients'
PUBACKs go out. The fault is injected at the store's write seam, as in the STOMP host's
tests (``test_store_faults``)."""

from __future__ import annotations

import asyncio
import sqlite3
import struct
from pathlib import Path
from typing import Any

import pytest
from mqtt_pair import connect_packet, decode_server, packet, subscribe_packet
from test_store_faults import FULL_ERRORS, Faults

from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.mqtt import codec
from jmspy.broker_ref.protocols.mqtt.properties import encode_properties, encode_string
from jmspy.broker_ref.protocols.mqtt.server import MqttServer
from jmspy.broker_ref.store.sqlite_store import SqliteStore

WAIT = 10.0


async def _packets(reader: asyncio.StreamReader) -> list[dict[str, Any]]:
    """Every packet the server writes until it closes the connection."""
    parser, out = codec.PacketParser(1 << 20), []
    while data := await asyncio.wait_for(reader.read(65536), WAIT):
        parser.feed(data)
        while (item := parser.next_packet()) is not None:
            out.append(decode_server(item[0], item[1], 5))
    return out


async def _next(reader: asyncio.StreamReader, count: int) -> list[dict[str, Any]]:
    parser, out = codec.PacketParser(1 << 20), []
    while len(out) < count:
        data = await asyncio.wait_for(reader.read(65536), WAIT)
        assert data, f"closed after {out}"
        parser.feed(data)
        while (item := parser.next_packet()) is not None:
            out.append(decode_server(item[0], item[1], 5))
    return out


def _publish(topic: str, pid: int) -> bytes:
    body = encode_string(topic) + struct.pack("!H", pid) + encode_properties({})
    return packet(0x32, body + b"payload")


def _stored_topics(path: Path) -> list[str]:
    db = sqlite3.connect(str(path))
    try:
        return sorted(r[0] for r in db.execute("SELECT dest FROM messages"))
    finally:
        db.close()


def _fail_a(when: str) -> Any:
    """Which writes fail: the INSERT of a's message at once (``insert``: the session
    refuses the PUBLISH itself, 0x97), or (``commit``) the group commit holding it and
    then its INSERT redone alone, so that only a's message is lost to the commit."""
    tries = [0]

    def which(sql: str, params: Any) -> bool:
        if sql.startswith("INSERT INTO messages") and "a.x" in params:
            tries[0] += 1
            return when == "insert" or tries[0] == 2
        return when == "commit" and sql == "COMMIT" and tries[0] == 1

    return which


@pytest.mark.parametrize(("when", "error", "code"), [
    ("insert", "full", 0x97), ("commit", "full", 0x97), ("commit", "io", 0x80)])
def test_a_publish_the_store_loses_ends_its_connection_without_the_puback(
        tmp_path: Path, when: str, error: str, code: int) -> None:
    """A full disk is a quota (0x97) whether the INSERT or the group commit met it;
    another I/O error is unspecified (0x80)."""
    path = tmp_path / "m.sqlite"

    async def main() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        store = SqliteStore(path, group_commit=True)
        faults = Faults(store)
        broker = Broker(name="faults", store=store)
        server = MqttServer(broker)
        _, port = await server.start("127.0.0.1", 0)
        try:
            keeper = await asyncio.open_connection("127.0.0.1", port)
            keeper[1].write(connect_packet("keeper", version=5, clean=False,
                                           props={"session_expiry_interval": 3600}))
            keeper[1].write(subscribe_packet(1, ("a/#", 1), ("b/#", 1), version=5))
            assert [p["type"] for p in await _next(keeper[0], 2)] == [
                codec.CONNACK, codec.SUBACK]
            keeper[1].close()
            a = await asyncio.open_connection("127.0.0.1", port)
            b = await asyncio.open_connection("127.0.0.1", port)
            for name, (_, writer) in (("a", a), ("b", b)):
                writer.write(connect_packet(name, version=5))
                await writer.drain()
            await _next(a[0], 1)
            await _next(b[0], 1)
            faults.error = (FULL_ERRORS["SQLITE_FULL"] if error == "full" else
                            lambda: sqlite3.OperationalError("disk I/O error"))
            faults.which = _fail_a(when)
            a[1].write(_publish("a/x", 1))
            b[1].write(_publish("b/x", 1))
            await a[1].drain()
            await b[1].drain()
            got_a = await _packets(a[0])  # until the server closes it
            got_b = await _next(b[0], 1)
            a[1].close()
            b[1].close()
            return got_a, got_b
        finally:
            await server.stop()
            broker.close()

    got_a, got_b = asyncio.run(main())
    assert [p["type"] for p in got_a] == [codec.DISCONNECT], got_a
    assert got_a[0]["code"] == code
    assert ("store is full" if error == "full" else "I/O error") in (
        got_a[0]["props"]["reason_string"])
    assert got_b == [{"type": codec.PUBACK, "pid": 1, "code": 0}]
    # (a's write is kept by the store and redone once it writes again: a client that
    # sends it again may have it twice, at least once as QoS 1 promises; never lost)
    assert "b.x" in _stored_topics(path)
