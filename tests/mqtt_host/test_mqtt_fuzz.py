"""Hypothesis fuzzes a live MQTT port (an in-process broker's ``mqtt://`` connector) with
random bytes and with valid MQTT 3.1.1 / 5 packet streams mutated (bytes flipped,
inserted, deleted; lengths cut): whatever the server writes back is well-formed MQTT a
server may send, beginning with CONNACK; nothing is logged as an internal error; a
well-behaved client on another connection is served after every example; and no
connection is left behind."""

from __future__ import annotations

import logging
import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from error_log import ErrorLog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mqtt_pair import connect_packet, packet, subscribe_packet
from mqtt_process import Raw
from polling import wait_until
from raw_sockets import send_and_read_until_closed

from jmspy.broker_ref.protocols.mqtt import codec
from jmspy.broker_ref.protocols.mqtt.properties import encode_properties, encode_string

#: the packet types a server sends (MQTT 5 2.1.2; AUTH is never sent by this broker)
SERVER_TYPES = {codec.CONNACK, codec.PUBLISH, codec.PUBACK, codec.PUBREC, codec.PUBREL,
                codec.PUBCOMP, codec.SUBACK, codec.UNSUBACK, 13, codec.DISCONNECT}


@pytest.fixture(scope="module")
def fuzz_port() -> Iterator[tuple[Any, int, ErrorLog]]:
    """One in-process broker serving MQTT for the whole module (hypothesis calls the test
    many times), and what its MQTT host logs as errors."""
    from jmspy.transports import vm

    name = f"mqtt-fuzz-{uuid.uuid4().hex[:8]}"
    host = vm.start_broker(name, max_destination_length=200)
    errors = ErrorLog()
    logger = logging.getLogger("jmspy.broker.mqtt")
    logger.addHandler(errors)
    try:
        url = host.add_connector("mqtt://127.0.0.1:0")
        yield host, int(url.rsplit(":", 1)[1]), errors
    finally:
        logger.removeHandler(errors)
        vm.stop_broker(name)


def _body(version: int, *parts: bytes) -> bytes:
    return b"".join(parts[:1]) + (encode_properties({}) if version == 5 else b"") + b"".join(
        parts[1:])


def _good(version: int) -> list[bytes]:
    """Valid packets of every kind a client sends after CONNECT."""
    pid = struct.pack("!H", 7)
    return [
        subscribe_packet(1, ("fz/#", 2), ("$share/g/fz/+", 1), version=version),
        packet(0x30, _body(version, encode_string("fz/a")) + b"qos0"),
        packet(0x32, _body(version, encode_string("fz/b") + pid) + b"qos1"),
        packet(0x35, _body(version, encode_string("fz/c") + pid) + b"qos2, retained"),
        packet(0x62, pid),  # PUBREL
        packet(0x40, pid), packet(0x50, pid), packet(0x70, pid),  # PUBACK, PUBREC, PUBCOMP
        packet(0xA2, _body(version, struct.pack("!H", 2)) + encode_string("fz/#")),
        packet(0xC0, b""),  # PINGREQ
        packet(0xE0, b"\x00" if version == 5 else b""),  # DISCONNECT
    ]


@st.composite
def streams(draw: st.DrawFn) -> tuple[int, bytes]:
    version = draw(st.sampled_from([4, 5]))
    first = connect_packet("fz-" + draw(st.text("abc", min_size=1, max_size=4)),
                           version=version, clean=draw(st.booleans()),
                           keep_alive=draw(st.sampled_from([0, 30])))
    data = bytearray(first + b"".join(draw(st.lists(st.sampled_from(_good(version)),
                                                    min_size=1, max_size=8))))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        pos = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[pos]
        else:
            del data[pos:]
        if not data:
            data += b"\x10"
    return version, bytes(data)


def _good_client_round_trip(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        good = Raw(sock, 5)
        assert good.exchange(connect_packet("good", version=5), 1)[0]["code"] == 0
        assert good.exchange(subscribe_packet(1, ("good/t", 1), version=5), 1)[0]["codes"] == [1]
        body = encode_string("good/t") + struct.pack("!H", 1) + encode_properties({})
        got = good.exchange(packet(0x32, body + b"served"), 2)
        assert {p["type"] for p in got} == {codec.PUBACK, codec.PUBLISH}
        assert [p["payload"] for p in got if p["type"] == codec.PUBLISH] == [b"served"]


def _assert_well_formed(reply: bytes) -> None:
    parser = codec.PacketParser(1 << 24)
    parser.feed(reply)
    kinds = []
    while (item := parser.next_packet()) is not None:  # well-formed, or this raises
        kinds.append(item[0] >> 4)
    assert parser.buffered == 0, f"a cut packet at the end of {reply!r}"
    assert set(kinds) <= SERVER_TYPES, kinds
    assert not kinds or kinds[0] == codec.CONNACK, kinds


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(example=st.one_of(streams(), st.tuples(st.just(0), st.binary(max_size=300))))
def test_fuzzed_packets_do_not_hurt_the_mqtt_port(
        fuzz_port: tuple[Any, int, ErrorLog], example: tuple[int, bytes]) -> None:
    _, port, errors = fuzz_port
    _assert_well_formed(send_and_read_until_closed("127.0.0.1", port, example[1]))
    assert not errors.records, [r.getMessage() for r in errors.records]
    _good_client_round_trip(port)


def test_the_mqtt_port_leaves_no_connection_behind_after_fuzzing(
        fuzz_port: tuple[Any, int, ErrorLog]) -> None:
    host, port, errors = fuzz_port
    for i in range(20):  # sockets cut mid-packet, after a CONNECT and before one
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(connect_packet(f"cut-{i}", version=5)[: 3 + i])
    _good_client_round_trip(port)

    def connected() -> int:
        with host.lock:
            return len(host.broker.connections())

    wait_until(lambda: connected() == 0, 10)  # the server sees the last sockets close
    assert connected() == 0
    assert not errors.records, [r.getMessage() for r in errors.records]
