"""MQTT logins on real sockets, as STOMP's: passwords are checked on the login thread,
not the event loop; the packets behind CONNECT wait for the login and are then served;
failed logins are throttled per address and user name (CONNACK 0x9F, counted), and a
wrong password cannot take a connected client's session over."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from broker_core.core_support import FakeClock
from mqtt_pair import connect_packet, decode_server, device_policy, subscribe_packet
from recording import login_threads

from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.core.throttle import ThrottleSettings
from jmspy.broker_ref.protocols.connection_limits import ConnectionLimits
from jmspy.broker_ref.protocols.mqtt import codec
from jmspy.broker_ref.protocols.mqtt.server import MqttServer

WAIT = 10.0


class _Raw:
    """One client socket speaking raw MQTT 5 packets."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._parser = codec.PacketParser(1 << 20)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def packet(self) -> dict[str, Any]:
        while (item := self._parser.next_packet()) is None:
            data = await asyncio.wait_for(self.reader.read(65536), WAIT)
            assert data, "the server closed the connection"
            self._parser.feed(data)
        return decode_server(item[0], item[1], 5)

    async def connack(self, client_id: str, user: str, password: str) -> dict[str, Any]:
        await self.send(connect_packet(client_id, version=5, user=user, password=password))
        return await self.packet()

    def close(self) -> None:
        self.writer.close()


async def _serving(broker: Broker, **options: Any) -> tuple[MqttServer, str, int]:
    server = MqttServer(broker, **options)
    host, port = await server.start("127.0.0.1", 0)
    return server, host, port


async def _client(host: str, port: int) -> _Raw:
    return _Raw(*await asyncio.open_connection(host, port))


def test_passwords_are_checked_on_the_login_thread_not_the_event_loop() -> None:
    policy = device_policy()
    threads = login_threads(policy)

    async def main() -> None:
        broker = Broker(clock=FakeClock(), security=policy)
        server, host, port = await _serving(broker)
        try:
            good, bad = await _client(host, port), await _client(host, port)
            assert (await good.connack("good", "alice", "alice-pw"))["code"] == 0
            assert (await bad.connack("bad", "alice", "wrong"))["code"] == 0x86
            good.close()
            bad.close()
        finally:
            await server.stop()
            broker.close()

    asyncio.run(main())
    assert len(threads) == 2 and all(t.startswith("jmspy-login") for t in threads)
    assert threading.current_thread().name not in threads


def test_packets_sent_behind_connect_wait_for_the_login_and_are_then_served() -> None:
    async def main() -> None:
        broker = Broker(clock=FakeClock(), security=device_policy())
        server, host, port = await _serving(broker)
        try:
            c = await _client(host, port)
            publish = bytes([0x32, 14]) + b"\x00\x08plant/p1\x00\x01\x00" + b"x"
            await c.send(connect_packet("dev", version=5, user="alice", password="alice-pw")
                         + subscribe_packet(1, ("plant/#", 1), version=5) + publish)
            got = [await c.packet() for _ in range(4)]
            assert got[0]["type"] == codec.CONNACK and got[0]["code"] == 0
            assert got[1] == {"type": codec.SUBACK, "pid": 1, "codes": [1]}
            assert {p["type"] for p in got[2:]} == {codec.PUBACK, codec.PUBLISH}
            c.close()
        finally:
            await server.stop()
            broker.close()

    asyncio.run(main())


def test_failed_logins_are_throttled_and_the_refusal_says_so() -> None:
    async def main() -> None:
        broker = Broker(clock=FakeClock(), security=device_policy())
        limits = ConnectionLimits(throttle=ThrottleSettings(
            delay_after=5, refuse_after=2, address_refuse_after=10))
        server, host, port = await _serving(broker, limits=limits)
        try:
            for i in range(2):
                guess = await _client(host, port)
                assert (await guess.connack(f"g{i}", "alice", "guess"))["code"] == 0x86
                guess.close()
            late = await _client(host, port)
            refused = await late.connack("late", "alice", "alice-pw")  # right, unchecked
            assert refused["code"] == 0x9F
            assert refused["props"]["reason_string"] == "too many failed logins"
            late.close()
            usage = broker.usage()
            assert usage["connectionsRefusedLoginThrottled"] == 1
            assert usage["connectionsRefusedAuthentication"] == 2
        finally:
            await server.stop()
            broker.close()

    asyncio.run(main())


def test_a_wrong_password_cannot_take_a_connected_session_over() -> None:
    async def main() -> None:
        broker = Broker(clock=FakeClock(), security=device_policy())
        server, host, port = await _serving(broker)
        try:
            dev, intruder = await _client(host, port), await _client(host, port)
            assert (await dev.connack("dev", "alice", "alice-pw"))["code"] == 0
            assert (await intruder.connack("dev", "alice", "guess"))["code"] == 0x86
            await dev.send(bytes([0xC0, 0]))  # PINGREQ: dev is still served
            assert (await dev.packet())["type"] == codec.PINGRESP
            dev.close()
            intruder.close()
        finally:
            await server.stop()
            broker.close()

    asyncio.run(main())
