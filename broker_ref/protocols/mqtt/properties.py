"""MQTT 5 properties: identifiers, wire types, and their encoding (no I/O).

Properties are kept as a dict of name -> value; ``user_property`` is a list of
(name, value) pairs (MQTT 5 allows repeats and keeps their order).
"""

from __future__ import annotations

import struct
from typing import Any

from jmspy.errors import JMSException

__all__ = ["MalformedPacket", "decode_properties", "decode_varint", "encode_properties",
           "encode_string", "encode_varint", "read_binary", "read_string"]


class MalformedPacket(JMSException, ValueError):
    """A packet that breaks the MQTT encoding rules; ``reason`` is the v5 reason code."""

    def __init__(self, message: str, reason: int = 0x81) -> None:
        super().__init__(message)
        self.reason = reason


_BYTE, _U16, _U32, _VARINT, _STR, _BIN, _PAIR = range(7)

#: identifier -> (name, wire type)
_BY_ID: dict[int, tuple[str, int]] = {
    0x01: ("payload_format_indicator", _BYTE),
    0x02: ("message_expiry_interval", _U32),
    0x03: ("content_type", _STR),
    0x08: ("response_topic", _STR),
    0x09: ("correlation_data", _BIN),
    0x0B: ("subscription_identifier", _VARINT),
    0x11: ("session_expiry_interval", _U32),
    0x12: ("assigned_client_identifier", _STR),
    0x13: ("server_keep_alive", _U16),
    0x15: ("authentication_method", _STR),
    0x16: ("authentication_data", _BIN),
    0x17: ("request_problem_information", _BYTE),
    0x18: ("will_delay_interval", _U32),
    0x19: ("request_response_information", _BYTE),
    0x1A: ("response_information", _STR),
    0x1C: ("server_reference", _STR),
    0x1F: ("reason_string", _STR),
    0x21: ("receive_maximum", _U16),
    0x22: ("topic_alias_maximum", _U16),
    0x23: ("topic_alias", _U16),
    0x24: ("maximum_qos", _BYTE),
    0x25: ("retain_available", _BYTE),
    0x26: ("user_property", _PAIR),
    0x27: ("maximum_packet_size", _U32),
    0x28: ("wildcard_subscription_available", _BYTE),
    0x29: ("subscription_identifier_available", _BYTE),
    0x2A: ("shared_subscription_available", _BYTE),
}
_BY_NAME = {name: (ident, kind) for ident, (name, kind) in _BY_ID.items()}


def encode_varint(value: int) -> bytes:
    if not 0 <= value <= 268_435_455:
        raise ValueError(f"variable byte integer out of range: {value}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def decode_varint(data: bytes | bytearray, pos: int) -> tuple[int, int]:
    """(value, next position); raises MalformedPacket past four bytes or the end."""
    value = shift = 0
    for i in range(4):
        if pos + i >= len(data):
            raise MalformedPacket("truncated variable byte integer")
        byte = data[pos + i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos + i + 1
        shift += 7
    raise MalformedPacket("variable byte integer longer than four bytes")


def read_binary(data: bytes, pos: int) -> tuple[bytes, int]:
    if pos + 2 > len(data):
        raise MalformedPacket("truncated length prefix")
    (n,) = struct.unpack_from("!H", data, pos)
    end = pos + 2 + n
    if end > len(data):
        raise MalformedPacket("string or binary data runs past the packet's end")
    return bytes(data[pos + 2:end]), end


def read_string(data: bytes, pos: int) -> tuple[str, int]:
    raw, pos = read_binary(data, pos)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedPacket("a string is not valid UTF-8") from None
    if "\x00" in text:
        raise MalformedPacket("a string contains U+0000, which MQTT forbids")
    return text, pos


def _binary(raw: bytes) -> bytes:
    if len(raw) > 0xFFFF:
        raise ValueError(f"string or binary data of {len(raw)} bytes: MQTT allows 65535")
    return struct.pack("!H", len(raw)) + raw


def encode_string(text: str) -> bytes:
    return _binary(text.encode("utf-8"))


def decode_properties(data: bytes, pos: int) -> tuple[dict[str, Any], int]:
    """The property block at ``pos`` (its length first): (properties, next position)."""
    length, pos = decode_varint(data, pos)
    end = pos + length
    if end > len(data):
        raise MalformedPacket("properties run past the packet's end")
    props: dict[str, Any] = {}
    while pos < end:
        ident, pos = decode_varint(data, pos)
        entry = _BY_ID.get(ident)
        if entry is None:
            raise MalformedPacket(f"unknown property identifier 0x{ident:02x}")
        name, kind = entry
        value: Any
        if kind == _BYTE:
            if pos >= end:
                raise MalformedPacket(f"truncated property {name}")
            value, pos = data[pos], pos + 1
        elif kind == _U16:
            if pos + 2 > end:
                raise MalformedPacket(f"truncated property {name}")
            (value,), pos = struct.unpack_from("!H", data, pos), pos + 2
        elif kind == _U32:
            if pos + 4 > end:
                raise MalformedPacket(f"truncated property {name}")
            (value,), pos = struct.unpack_from("!I", data, pos), pos + 4
        elif kind == _VARINT:
            value, pos = decode_varint(data, pos)
        elif kind == _STR:
            value, pos = read_string(data, pos)
        elif kind == _BIN:
            value, pos = read_binary(data, pos)
        else:
            key, pos = read_string(data, pos)
            val, pos = read_string(data, pos)
            props.setdefault(name, []).append((key, val))
            continue
        if name == "subscription_identifier":
            props.setdefault(name, []).append(value)
            continue
        if name in props:
            raise MalformedPacket(f"property {name} appears twice", 0x82)
        props[name] = value
    if pos != end:
        raise MalformedPacket("properties run past their declared length")
    return props, end


def encode_properties(props: dict[str, Any]) -> bytes:
    """The property block (its length first) for ``props``; None values are left out."""
    out = bytearray()
    for name, value in props.items():
        if value is None:
            continue
        ident, kind = _BY_NAME[name]
        values = value if kind == _PAIR or name == "subscription_identifier" else [value]
        for v in values:
            out += encode_varint(ident)
            if kind == _BYTE:
                out.append(v)
            elif kind == _U16:
                out += struct.pack("!H", v)
            elif kind == _U32:
                out += struct.pack("!I", v)
            elif kind == _VARINT:
                out += encode_varint(v)
            elif kind == _STR:
                out += encode_string(v)
            elif kind == _BIN:
                out += _binary(v)
            else:
                out += encode_string(v[0]) + encode_string(v[1])
    return encode_varint(len(out)) + bytes(out)
