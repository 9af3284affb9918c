"""A subscriber that stops reading does not make the MQTT host buffer the topic for it:
once its socket congests the host stops settling its QoS 0 deliveries, so credit stops
and at most one window per subscription waits in the host's write buffer (the rest in the
core, where memory limits and paging apply); other clients are served meanwhile, and
when the slow reader reads again it gets every message, in order."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

from mqtt_pair import connect_packet, decode_server, packet, subscribe_packet

from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.mqtt import codec
from jmspy.broker_ref.protocols.mqtt.properties import encode_properties, encode_string
from jmspy.broker_ref.protocols.mqtt.server import MqttServer
from jmspy.broker_ref.protocols.mqtt.session import CREDIT

WAIT = 10.0
#: messages published while the subscriber does not read, and their size: 16 MB in all,
#: far more than the socket buffers on both sides hold
COUNT = 8_000
PAYLOAD = 2048


class _Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._parser = codec.PacketParser(1 << 24)

    async def packets(self, count: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while len(out) < count:
            while len(out) < count and (item := self._parser.next_packet()) is not None:
                out.append(decode_server(item[0], item[1], 5))
            if len(out) < count:
                data = await asyncio.wait_for(self.reader.read(1 << 20), WAIT)
                assert data, f"closed after {len(out)} packets"
                self._parser.feed(data)
        return out


async def _client(port: int, client_id: str, rcvbuf: int | None = None) -> _Client:
    sock = socket.socket()
    if rcvbuf is not None:  # a small kernel buffer: the socket congests early
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 16)
    client = _Client(reader, writer)
    writer.write(connect_packet(client_id, version=5))
    assert (await client.packets(1))[0]["code"] == 0
    return client


def _publish(topic: str, payload: bytes, qos: int = 0, pid: int = 0) -> bytes:
    body = encode_string(topic) + (struct.pack("!H", pid) if qos else b"")
    return packet(0x30 | (qos << 1), body + encode_properties({}) + payload)


def test_a_subscriber_that_stops_reading_holds_one_window_and_loses_nothing() -> None:
    async def main() -> None:
        # room for the whole backlog in the core (under the default 64 MB a topic's share
        # is 6.4 MB, and producer flow control would hold the publisher instead: tested
        # in test_session_options_pair)
        broker = Broker(name="slow", memory_limit=256 * 1024 * 1024)
        server = MqttServer(broker)
        _, port = await server.start("127.0.0.1", 0)
        try:
            slow = await _client(port, "slow", rcvbuf=16_384)
            slow.writer.write(subscribe_packet(1, ("feed/#", 0), version=5))
            assert (await slow.packets(1))[0]["codes"] == [0]
            # from here on the slow client reads nothing (its reader's buffer fills and
            # asyncio stops reading its socket)
            (slow_conn,) = [c for c in server.connections
                            if c.session.client_id == "slow"]
            pub = await _client(port, "pub")
            for i in range(COUNT):
                pub.writer.write(_publish("feed/a", i.to_bytes(4, "big") * (PAYLOAD // 4)))
                if i % 500 == 0:
                    await asyncio.wait_for(pub.writer.drain(), WAIT)
            pub.writer.write(_publish("feed/a", b"last", qos=1, pid=1))
            await asyncio.wait_for(pub.writer.drain(), WAIT)
            (ack,) = await pub.packets(1)  # every PUBLISH before it was routed
            assert (ack["type"], ack["pid"]) == (codec.PUBACK, 1)

            assert slow_conn.transport is not None
            held = slow_conn.transport.get_write_buffer_size()
            window = (CREDIT + 1) * (PAYLOAD + 16)
            assert held <= 65_536 + window, held  # the high-water mark and one window

            other = await _client(port, "other")  # served while the slow one is stuck
            other.writer.write(subscribe_packet(1, ("other/t", 0), version=5))
            await other.packets(1)
            other.writer.write(_publish("other/t", b"served"))
            (got,) = await other.packets(1)
            assert got["payload"] == b"served"

            received = await slow.packets(COUNT + 1)  # it reads again: everything, in order
            assert [p["payload"][:4] for p in received[:COUNT]] == [
                i.to_bytes(4, "big") for i in range(COUNT)]
            assert received[-1]["payload"] == b"last"
            for client in (slow, pub, other):
                client.writer.close()
        finally:
            await server.stop()
            broker.close()

    asyncio.run(main())
