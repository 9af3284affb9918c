"""MQTT 3.1.1 and 5.0 packets: a stream parser and encoders (sans-I/O, no asyncio).

Why our own codec: neither ``mqttproto`` nor ``moat-lib-mqtt`` is installable from the
package indexes this project builds with, and both bring anyio into what must stay a
plain bytes-in, bytes-out layer; the broker side needs only the server half of the
protocol (decode what clients send, encode what a server sends), which is small.

:class:`PacketParser` cuts the byte stream into packets and refuses one larger than its
maximum before buffering it; :func:`decode` turns one packet's bytes into a
:class:`Packet` (its fields in ``fields``), raising :class:`MalformedPacket` with the v5
reason code for anything that breaks the encoding rules.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from .properties import (
    MalformedPacket,
    decode_properties,
    decode_varint,
    encode_properties,
    encode_string,
    encode_varint,
    read_binary,
    read_string,
)

__all__ = ["CONNECT", "DISCONNECT", "PINGREQ", "PUBACK", "PUBCOMP", "PUBLISH", "PUBREC",
           "PUBREL", "SUBSCRIBE", "UNSUBSCRIBE", "MalformedPacket", "Packet", "PacketParser",
           "PacketTooLarge", "decode", "encode_ack", "encode_connack", "encode_disconnect",
           "encode_publish", "encode_suback", "encode_unsuback"]

CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP = 1, 2, 3, 4, 5, 6, 7
SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK, PINGREQ, PINGRESP, DISCONNECT, AUTH = range(8, 16)
V311, V5 = 4, 5


class PacketTooLarge(MalformedPacket):
    """A packet past the server's Maximum Packet Size (v5 reason 0x95)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"packet of {size} bytes is over the broker's maximum packet size "
                         f"of {limit} bytes; send smaller messages or raise the broker's "
                         "[broker.mqtt] max-packet-bytes", 0x95)


@dataclass(slots=True)
class Packet:
    """One decoded packet: its type, the flags of its fixed header and its fields."""

    type: int
    flags: int
    fields: dict[str, Any] = field(default_factory=dict)


class PacketParser:
    """Cuts a byte stream into whole packets (``(first byte, body)`` pairs)."""

    __slots__ = ("_buf", "max_bytes")

    def __init__(self, max_bytes: int) -> None:
        self._buf = bytearray()
        self.max_bytes = max_bytes

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> None:
        self._buf += data

    def next_packet(self) -> tuple[int, bytes] | None:
        buf = self._buf
        if len(buf) < 2:
            return None
        try:
            length, start = decode_varint(buf, 1)
        except MalformedPacket:
            if len(buf) < 5:
                return None  # the length's bytes are still coming
            raise
        if start + length > self.max_bytes:
            raise PacketTooLarge(start + length, self.max_bytes)
        end = start + length
        if len(buf) < end:
            return None
        first, body = buf[0], bytes(buf[start:end])
        del buf[:end]
        return first, body


def _u16(data: bytes, pos: int) -> tuple[int, int]:
    if pos + 2 > len(data):
        raise MalformedPacket("truncated two-byte integer")
    return struct.unpack_from("!H", data, pos)[0], pos + 2


def decode(first: int, body: bytes, version: int) -> Packet:
    """Decode one packet; ``version`` is the session's (4 or 5; CONNECT sets it)."""
    ptype, flags = first >> 4, first & 0x0F
    p = Packet(ptype, flags)
    f = p.fields
    v5 = version == V5
    if ptype == PUBLISH:
        qos = (flags >> 1) & 3
        if qos == 3:
            raise MalformedPacket("PUBLISH with QoS 3, which does not exist")
        f.update(dup=bool(flags & 8), qos=qos, retain=bool(flags & 1))
        f["topic"], pos = read_string(body, 0)
        f["packet_id"] = 0
        if qos:
            f["packet_id"], pos = _u16(body, pos)
            if f["packet_id"] == 0:
                raise MalformedPacket("PUBLISH with QoS > 0 and packet id 0")
        f["properties"], pos = decode_properties(body, pos) if v5 else ({}, pos)
        f["payload"] = body[pos:]
        return p
    expected = 2 if ptype in (PUBREL, SUBSCRIBE, UNSUBSCRIBE) else 0
    if flags != expected:
        raise MalformedPacket(f"packet type {ptype} with reserved flags {flags:#x}")
    if ptype == CONNECT:
        return _decode_connect(p, body)
    if ptype in (PUBACK, PUBREC, PUBREL, PUBCOMP):
        f["packet_id"], pos = _u16(body, 0)
        f["reason"] = body[pos] if v5 and len(body) > pos else 0
        f["properties"] = (decode_properties(body, pos + 1)[0]
                           if v5 and len(body) > pos + 1 else {})
        return p
    if ptype in (SUBSCRIBE, UNSUBSCRIBE):
        f["packet_id"], pos = _u16(body, 0)
        f["properties"], pos = decode_properties(body, pos) if v5 else ({}, pos)
        topics: list[tuple[str, int]] = []
        while pos < len(body):
            topic, pos = read_string(body, pos)
            options = 0
            if ptype == SUBSCRIBE:
                if pos >= len(body):
                    raise MalformedPacket("SUBSCRIBE topic filter without options")
                options, pos = body[pos], pos + 1
                if options & 3 == 3 or options & (0xC0 if v5 else 0xFC):
                    raise MalformedPacket(f"SUBSCRIBE options {options:#x} are invalid")
            topics.append((topic, options))
        if not topics:
            raise MalformedPacket("SUBSCRIBE/UNSUBSCRIBE without a topic filter", 0x82)
        f["topics"] = topics
        return p
    if ptype == PINGREQ:
        return p
    if ptype == DISCONNECT:
        f["reason"] = body[0] if v5 and body else 0
        f["properties"] = decode_properties(body, 1)[0] if v5 and len(body) > 1 else {}
        return p
    raise MalformedPacket(f"packet type {ptype} is not one a client sends to a server", 0x82)


def _decode_connect(p: Packet, body: bytes) -> Packet:
    f = p.fields
    name, pos = read_string(body, 0)
    if pos >= len(body):
        raise MalformedPacket("truncated CONNECT")
    level = body[pos]
    if name not in ("MQTT", "MQIsdp") or level not in (3, 4, 5):
        f.update(protocol=name, level=level, unsupported=True)
        return p
    f.update(protocol=name, level=level, unsupported=level == 3)
    if pos + 4 > len(body):
        raise MalformedPacket("truncated CONNECT")
    flags = body[pos + 1]
    if flags & 1:
        raise MalformedPacket("CONNECT's reserved flag is set")
    f["keep_alive"] = struct.unpack_from("!H", body, pos + 2)[0]
    pos += 4
    v5 = level == V5
    f["clean"] = bool(flags & 2)
    f["properties"], pos = decode_properties(body, pos) if v5 else ({}, pos)
    f["client_id"], pos = read_string(body, pos)
    will_qos = (flags >> 3) & 3
    if flags & 4:
        if will_qos == 3:
            raise MalformedPacket("CONNECT with will QoS 3")
        wprops, pos = decode_properties(body, pos) if v5 else ({}, pos)
        topic, pos = read_string(body, pos)
        payload, pos = read_binary(body, pos)
        f["will"] = dict(topic=topic, payload=payload, qos=will_qos,
                         retain=bool(flags & 0x20), properties=wprops)
    elif will_qos or flags & 0x20:
        raise MalformedPacket("CONNECT has will QoS or will retain without a will")
    f["username"] = f["password"] = None
    if flags & 0x80:
        f["username"], pos = read_string(body, pos)
    if flags & 0x40:
        f["password"], pos = read_binary(body, pos)
    if pos != len(body):
        raise MalformedPacket("CONNECT has bytes after its payload")
    return p


def _packet(first: int, body: bytes) -> bytes:
    return bytes([first]) + encode_varint(len(body)) + body


def encode_connack(version: int, present: bool, code: int,
                   props: dict[str, Any] | None = None) -> bytes:
    body = bytes([1 if present else 0, code])
    if version == V5:
        body += encode_properties(props or {})
    return _packet(CONNACK << 4, body)


def encode_publish(version: int, topic: str, payload: bytes, qos: int, packet_id: int,
                   *, retain: bool = False, dup: bool = False,
                   props: dict[str, Any] | None = None) -> bytes:
    first = (PUBLISH << 4) | (8 if dup else 0) | (qos << 1) | (1 if retain else 0)
    body = encode_string(topic)
    if qos:
        body += struct.pack("!H", packet_id)
    if version == V5:
        body += encode_properties(props or {})
    return _packet(first, body + payload)


def encode_ack(version: int, ptype: int, packet_id: int, reason: int = 0,
               reason_string: str | None = None) -> bytes:
    """PUBACK, PUBREC, PUBREL or PUBCOMP."""
    body = struct.pack("!H", packet_id)
    if version == V5 and (reason or reason_string):
        body += bytes([reason]) + encode_properties({"reason_string": reason_string})
    return _packet((ptype << 4) | (2 if ptype == PUBREL else 0), body)


def encode_suback(version: int, packet_id: int, codes: list[int],
                  reason_string: str | None = None) -> bytes:
    body = struct.pack("!H", packet_id)
    if version == V5:
        body += encode_properties({"reason_string": reason_string})
    return _packet(SUBACK << 4, body + bytes(codes))


def encode_unsuback(version: int, packet_id: int, codes: list[int]) -> bytes:
    body = struct.pack("!H", packet_id)
    if version == V5:
        body += encode_properties({}) + bytes(codes)
    return _packet(UNSUBACK << 4, body)


PINGRESP_BYTES = _packet(PINGRESP << 4, b"")


def encode_disconnect(reason: int, reason_string: str | None = None) -> bytes:
    """A v5 server DISCONNECT (3.1.1 has none: the server just closes)."""
    return _packet(DISCONNECT << 4,
                   bytes([reason]) + encode_properties({"reason_string": reason_string}))
