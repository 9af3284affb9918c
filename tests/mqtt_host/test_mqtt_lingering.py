"""The MQTT host's last word reaches a client that is still sending: a PUBLISH over
``max-packet-bytes`` is refused with DISCONNECT 0x95 while its client, which has not read
what the host sent it for a while, streams the rest of it. The host shuts its write side
after the reply and reads (and drops) what still comes for a while before it closes: a
socket closed with unread input answers with a RST, on which the kernel drops the bytes
it had not sent yet -- the deliveries queued, and the DISCONNECT behind them."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from mqtt_pair import connect_packet, decode_server, subscribe_packet

from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.mqtt import codec
from jmspy.broker_ref.protocols.mqtt.properties import encode_string, encode_varint
from jmspy.broker_ref.protocols.mqtt.server import MqttServer

WAIT = 10.0
#: bytes the client sends behind the packet the host refuses: far more than the socket
#: buffers hold, so the host closes while they still come
STREAM = 8 * 1024 * 1024


def _publish(topic: str, payload: bytes, qos: int = 0) -> bytes:
    body = encode_string(topic) + (b"\x00\x01" if qos else b"") + b"\x00" + payload
    return bytes([0x30 | (qos << 1)]) + encode_varint(len(body)) + body


def _stuck_subscriber(port: int) -> socket.socket:
    """A v5 client subscribed to ``feed/#`` with a small receive buffer, and so many
    messages published to it, unread, that the host's socket has bytes queued that the
    client's full window does not let it send."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    sock.settimeout(WAIT)
    sock.connect(("127.0.0.1", port))
    sock.sendall(connect_packet("stuck", version=5) + subscribe_packet(1, ("feed/#", 0),
                                                                       version=5))
    parser, seen = codec.PacketParser(1 << 20), 0
    while seen < 2:  # CONNACK, SUBACK
        parser.feed(sock.recv(4096))
        while parser.next_packet() is not None:
            seen += 1
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as pub:
        pub.sendall(connect_packet("pub", version=5))
        pub.sendall(b"".join(_publish("feed/a", b"m" * 1000) for _ in range(2000)))
        pub.sendall(_publish("feed/a", b"last", qos=1))
        parser, acked = codec.PacketParser(1 << 20), []
        while len(acked) < 2:  # CONNACK, the PUBACK: everything before it was routed
            parser.feed(pub.recv(4096))
            while (item := parser.next_packet()) is not None:
                acked.append(item[0] >> 4)
    return sock


def _read_all(sock: socket.socket) -> list[dict[str, Any]]:
    """Every packet the host writes until it closes; a reset ends the reading as a close
    does, having lost what the host's kernel dropped."""
    parser, got = codec.PacketParser(1 << 24), bytearray()
    try:
        while data := sock.recv(65536):
            got += data
    except ConnectionResetError:
        pass
    parser.feed(bytes(got))
    out = []
    while (item := parser.next_packet()) is not None:
        out.append(decode_server(item[0], item[1], 5))
    return out


def test_an_oversized_publish_gets_its_disconnect_behind_deliveries_still_queued() -> None:
    header = bytes([0x30]) + encode_varint(STREAM + 100) + encode_string("big/t") + b"\x00"

    def check(port: int) -> list[dict[str, Any]]:
        sock = _stuck_subscriber(port)
        try:
            sock.sendall(header + b"x" * STREAM)  # the host refuses it from the header on
        except OSError:  # the host closed: the rest was not read any more
            pass
        try:
            return _read_all(sock)
        finally:
            sock.close()

    got = asyncio.run(_serve(Broker(name="linger"), max_packet_bytes=64 * 1024)(check))
    assert got and got[-1]["type"] == codec.DISCONNECT, [p["type"] for p in got[-3:]]
    assert got[-1]["code"] == 0x95
    assert "65536" in got[-1]["props"]["reason_string"]


def _serve(broker: Broker, **options: Any) -> Any:
    async def main(check: Any) -> Any:
        server = MqttServer(broker, **options)
        _, port = await server.start("127.0.0.1", 0)
        try:
            return await asyncio.to_thread(check, port)
        finally:
            await server.stop()
            broker.close()

    return main
