"""mqtt:// reads plain PUBACK packets itself (transports/mqtt/puback.py); paho's own
decoding is the oracle.

For any packet handed to ``_handle_pubackcomp`` (PUBACK or PUBCOMP, MQTT 5 or 3.1.1, the
packet id known or not), a client with the reader installed must end exactly as a plain
paho client does: the same ``on_publish`` calls (packet id, reason code, properties), the
same return value or the same exception, the same messages left in flight. Plain
PUBACKs must not reach paho's decoder; any other packet must.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import paho.mqtt._packet as paho_packet
import paho.mqtt.client as paho
import pytest
from hypothesis import HealthCheck, given, settings
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from jmspy.transports.mqtt.paho_private.puback import install, installed

SETTINGS = settings(max_examples=400, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

#: the PUBACK reason codes MQTT 5 defines (paho knows these), and some it does not
REASONS = (0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99)


def _client(protocol: int, *, fast: bool, in_flight: list[int]) -> Any:
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=protocol)
    calls: list[tuple[int, int, str, str]] = []
    client.on_publish = lambda c, u, mid, reason, props: calls.append(
        (mid, reason.value, reason.getName(), str(props.json())))
    client.calls = calls
    for mid in in_flight:
        message = paho.MQTTMessage(mid, b"t")
        message.qos = 1
        client._out_messages[mid] = message
        client._inflight_messages += 1
    if fast:
        assert install(client) and installed(client)
    return client


def _outcome(client: Any, cmd: str, packet: bytes) -> tuple[Any, ...]:
    client._in_packet = {"command": 0x40 if cmd == "PUBACK" else 0x70, "packet": packet}
    try:
        result: Any = client._handle_pubackcomp(cmd)
    except Exception as exc:  # paho's MalformedPacket for a broken packet
        result = type(exc)
    published = {mid: m.info.is_published() for mid, m in client._out_messages.items()}
    return result, client.calls, sorted(client._out_messages), published, \
        client._inflight_messages


def _packets() -> st.SearchStrategy[bytes]:
    mid = st.integers(0, 65535).map(lambda m: m.to_bytes(2, "big"))
    reason = st.sampled_from(REASONS).map(lambda r: bytes((r,)))
    props = Properties(PacketTypes.PUBACK)
    props.ReasonString = "full"
    return st.one_of(
        mid,
        st.tuples(mid, reason).map(b"".join),
        st.tuples(mid, reason, st.just(b"\x00")).map(b"".join),
        st.tuples(mid, reason, st.just(props.pack())).map(b"".join),
        st.tuples(mid, reason, st.binary(min_size=1, max_size=3)).map(b"".join),  # broken
        st.binary(max_size=8),
    )


@SETTINGS
@given(packet=_packets(), cmd=st.sampled_from(["PUBACK", "PUBCOMP"]),
       protocol=st.sampled_from([paho.MQTTv5, paho.MQTTv311]),
       in_flight=st.lists(st.integers(0, 65535), max_size=3, unique=True),
       mine=st.booleans())
def test_every_packet_ends_as_paho_ends_it(
    packet: bytes, cmd: str, protocol: int, in_flight: list[int], mine: bool
) -> None:
    if mine and len(packet) >= 2:  # most PUBACKs answer a send in flight
        in_flight = [*in_flight, int.from_bytes(packet[:2], "big")]
        in_flight = list(dict.fromkeys(in_flight))
    theirs = _outcome(_client(protocol, fast=False, in_flight=in_flight), cmd, packet)
    ours = _outcome(_client(protocol, fast=True, in_flight=in_flight), cmd, packet)
    assert ours == theirs


@pytest.mark.parametrize("protocol, packet", [
    (paho.MQTTv5, b"\x01\x02"),
    (paho.MQTTv5, b"\x01\x02\x10"),  # "No matching subscribers" (Mosquitto sends it)
    (paho.MQTTv5, b"\x01\x02\x00\x00"),
    (paho.MQTTv5, b"\x01\x02\x97\x00"),  # a refusal: the transport reads is_failure
    (paho.MQTTv311, b"\x01\x02"),
])
def test_plain_puback_never_reaches_pahos_decoder(
    monkeypatch: pytest.MonkeyPatch, protocol: int, packet: bytes
) -> None:
    monkeypatch.setattr(paho_packet, "decode_puback",
                        lambda *a: pytest.fail("paho's PUBACK decoder ran"))
    client = _client(protocol, fast=True, in_flight=[0x0102])
    result, calls, left, _, in_flight = _outcome(client, "PUBACK", packet)
    assert result == paho.MQTT_ERR_SUCCESS and left == [] and in_flight == 0
    ((mid, value, _, _),) = calls
    assert mid == 0x0102 and value == (packet[2] if len(packet) > 2 else 0)


def test_reason_codes_are_made_once_per_value() -> None:
    client = _client(paho.MQTTv5, fast=True, in_flight=[1, 2, 3])
    reasons: list[Any] = []
    client.on_publish = lambda c, u, mid, reason, props: reasons.append(reason)
    for mid in (1, 2, 3):
        _outcome(client, "PUBACK", mid.to_bytes(2, "big") + (b"\x10" if mid == 3 else b""))
    assert reasons[0] is reasons[1] and reasons[2] is not reasons[0]
    assert [r.value for r in reasons] == [0, 0, 0x10]


def test_puback_with_properties_and_pubcomp_go_to_paho(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name in ("decode_puback", "decode_pubcomp"):
        real = getattr(paho_packet, name)

        def spy(*args: Any, _real: Any = real, _name: str = name) -> Any:
            calls.append(_name)
            return _real(*args)

        monkeypatch.setattr(paho_packet, name, spy)
    props = Properties(PacketTypes.PUBACK)
    props.ReasonString = "quota"
    client = _client(paho.MQTTv5, fast=True, in_flight=[7, 8])
    _outcome(client, "PUBACK", b"\x00\x07\x97" + props.pack())
    _outcome(client, "PUBCOMP", b"\x00\x08")
    assert calls == ["decode_puback", "decode_pubcomp"]
    assert "quota" in client.calls[0][3]


def test_install_leaves_a_client_without_the_step_alone() -> None:
    class NotPaho:
        pass

    thing = NotPaho()
    assert not install(thing) and not installed(thing)
