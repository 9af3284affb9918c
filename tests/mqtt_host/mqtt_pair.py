"""MQTT sessions tested without sockets: a broker core on a fake clock and sans-I/O
:class:`MqttSession`\\ s fed raw client packets; every call returns the packets the
session wrote back, so "nothing more arrives" is a fact, not a wait."""

from __future__ import annotations

import struct
from typing import Any

from broker_core.core_support import FakeClock

from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.core.security import SecurityPolicy
from jmspy.broker_ref.protocols.mqtt import codec
from jmspy.broker_ref.protocols.mqtt.hub import MqttHub
from jmspy.broker_ref.protocols.mqtt.properties import (
    decode_properties,
    encode_properties,
    encode_string,
    encode_varint,
    read_string,
)
from jmspy.broker_ref.protocols.mqtt.session import MqttSession

__all__ = ["Client", "FakeClock", "MqttPair", "connect_packet", "device_policy", "packet",
           "subscribe_packet"]


def device_policy() -> SecurityPolicy:
    """alice (password alice-pw), role devices, may send and consume on plant.#."""
    policy = SecurityPolicy(iterations=1_000)  # test-friendly hashing rounds
    policy.add_user("alice", "alice-pw", roles=["devices"])
    policy.add_permission("plant.#", "topic", send=["devices"], consume=["devices"])
    return policy


def packet(first: int, body: bytes) -> bytes:
    return bytes([first]) + encode_varint(len(body)) + body


def connect_packet(client_id: str, *, version: int = 4, clean: bool = True,
                   keep_alive: int = 0, props: dict[str, Any] | None = None,
                   will: tuple[str, bytes, int] | None = None,
                   will_props: dict[str, Any] | None = None,
                   user: str | None = None, password: str | None = None) -> bytes:
    flags = (2 if clean else 0) | (0x80 if user is not None else 0) | (
        0x40 if password is not None else 0)
    if will is not None:
        flags |= 4 | (will[2] << 3)
    body = encode_string("MQTT") + bytes([version, flags]) + struct.pack("!H", keep_alive)
    if version == 5:
        body += encode_properties(props or {})
    body += encode_string(client_id)
    if will is not None:
        if version == 5:
            body += encode_properties(will_props or {})
        body += encode_string(will[0]) + struct.pack("!H", len(will[1])) + will[1]
    if user is not None:
        body += encode_string(user)
    if password is not None:
        body += struct.pack("!H", len(password)) + password.encode()
    return packet(0x10, body)


def subscribe_packet(pid: int, *filters: tuple[str, int], version: int = 4,
                     props: dict[str, Any] | None = None) -> bytes:
    """SUBSCRIBE ``filters`` ((filter, options byte) pairs)."""
    body = struct.pack("!H", pid)
    if version == 5:
        body += encode_properties(props or {})
    for text, options in filters:
        body += encode_string(text) + bytes([options])
    return packet(0x82, body)


def decode_server(first: int, body: bytes, version: int) -> dict[str, Any]:
    """One packet a server sent, as a dict (``type`` and its fields)."""
    ptype = first >> 4
    out: dict[str, Any] = {"type": ptype}
    v5 = version == 5
    if ptype == codec.CONNACK:
        out.update(present=bool(body[0] & 1), code=body[1])
        out["props"] = decode_properties(body, 2)[0] if v5 else {}
    elif ptype == codec.PUBLISH:
        qos = (first >> 1) & 3
        out.update(qos=qos, retain=bool(first & 1), dup=bool(first & 8))
        out["topic"], pos = read_string(body, 0)
        out["pid"] = 0
        if qos:
            out["pid"], pos = struct.unpack_from("!H", body, pos)[0], pos + 2
        out["props"], pos = decode_properties(body, pos) if v5 else ({}, pos)
        out["payload"] = body[pos:]
    elif ptype in (codec.PUBACK, codec.PUBREC, codec.PUBREL, codec.PUBCOMP):
        out["pid"] = struct.unpack_from("!H", body, 0)[0]
        out["code"] = body[2] if len(body) > 2 else 0
    elif ptype in (codec.SUBACK, codec.UNSUBACK):
        out["pid"] = struct.unpack_from("!H", body, 0)[0]
        pos = decode_properties(body, 2)[1] if v5 else 2
        out["codes"] = list(body[pos:])
    elif ptype == codec.DISCONNECT:
        out["code"] = body[0] if body else 0
        out["props"] = decode_properties(body, 1)[0] if len(body) > 1 else {}
    return out


class Client:
    """One client: raw packets in, decoded packets out."""

    def __init__(self, pair: MqttPair, version: int = 4) -> None:
        self.pair = pair
        self.version = version
        self.session = MqttSession(pair.broker, pair.hub, max_packet_bytes=pair.max_bytes,
                                   max_keep_alive=pair.max_keep_alive)
        self._parser = codec.PacketParser(1 << 28)
        pair.clients.append(self)

    def send(self, data: bytes) -> list[dict[str, Any]]:
        self.session.receive_data(data)
        return self.pair.pump(self)

    def take(self) -> list[dict[str, Any]]:
        if self.session.input_waiting and not self.session.reading_held:
            self.session.receive_data(b"")  # as the host does (server.py flush)
        data = self.session.data_to_send()
        self.session.written()
        self._parser.feed(data)
        out = []
        while (item := self._parser.next_packet()) is not None:
            out.append(decode_server(item[0], item[1], self.version))
        return out

    def connect(self, client_id: str, **options: Any) -> dict[str, Any]:
        answer = self.send(connect_packet(client_id, version=self.version, **options))
        assert answer and answer[0]["type"] == codec.CONNACK, answer
        self.pair.seen.setdefault(id(self), []).extend(answer[1:])  # stored deliveries
        return answer[0]

    def subscribe(self, pid: int, *filters: tuple[str, int],
                  props: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return self.send(subscribe_packet(pid, *filters, version=self.version, props=props))

    def unsubscribe(self, pid: int, *texts: str) -> list[dict[str, Any]]:
        body = struct.pack("!H", pid) + (encode_properties({}) if self.version == 5 else b"")
        return self.send(packet(0xA2, body + b"".join(encode_string(t) for t in texts)))

    def publish(self, topic: str, payload: bytes, qos: int = 0, pid: int = 0, *,
                retain: bool = False, props: dict[str, Any] | None = None,
                dup: bool = False) -> list[dict[str, Any]]:
        body = encode_string(topic) + (struct.pack("!H", pid) if qos else b"")
        if self.version == 5:
            body += encode_properties(props or {})
        first = 0x30 | (qos << 1) | (1 if retain else 0) | (8 if dup else 0)
        return self.send(packet(first, body + payload))

    def ack(self, ptype: int, pid: int) -> list[dict[str, Any]]:
        return self.send(packet((ptype << 4) | (2 if ptype == codec.PUBREL else 0),
                                struct.pack("!H", pid)))


class MqttPair:
    """A broker core on a fake clock, its MQTT hub, and clients."""

    def __init__(self, max_bytes: int = 64 * 1024, max_keep_alive: int = 0,
                 **broker_options: Any) -> None:
        self.max_keep_alive = max_keep_alive
        self.clock = FakeClock()
        self._broker_options = broker_options
        self.broker = Broker(clock=self.clock, **broker_options)
        self.hub = MqttHub(self.broker)
        self.max_bytes = max_bytes
        self.clients: list[Client] = []
        #: what other clients received during the last call, by client
        self.seen: dict[int, list[dict[str, Any]]] = {}

    def crash_and_restart(self, store: Any) -> None:
        """The broker dies as ``kill -9`` kills it (nothing is closed, no client is told)
        and a new one starts on ``store`` (the old one's, reopened) at the same clock;
        the old clients are gone."""
        options = {**self._broker_options, "store": store}
        self.broker = Broker(clock=self.clock, **options)
        self.hub = MqttHub(self.broker)
        self.clients, self.seen = [], {}

    def client(self, version: int = 4) -> Client:
        return Client(self, version)

    def persistent_subscriber(self, topic_filter: str, qos: int, client_id: str = "dev",
                              version: int = 4) -> Client:
        """A client of a persistent session (v5: expiry an hour) subscribed to
        ``topic_filter`` at ``qos``."""
        client = self.client(version)
        expiry = {"props": {"session_expiry_interval": 3600}} if version == 5 else {}
        client.connect(client_id, clean=False, **expiry)
        client.subscribe(1, (topic_filter, qos))
        return client

    def pump(self, caller: Client) -> list[dict[str, Any]]:
        """Collect every client's output; the caller's is returned, the others' kept
        in :attr:`inbox` until read."""
        mine: list[dict[str, Any]] = []
        for _ in range(8):
            moved = False
            for c in self.clients:
                got = c.take()
                if got:
                    moved = True
                    if c is caller:
                        mine.extend(got)
                    else:
                        self.seen.setdefault(id(c), []).extend(got)
            if not moved:
                break
        return mine

    def inbox(self, client: Client) -> list[dict[str, Any]]:
        got = self.pump(client)
        return self.seen.pop(id(client), []) + got
