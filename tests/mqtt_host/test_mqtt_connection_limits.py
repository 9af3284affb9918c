"""The MQTT listener's [limits], as on the STOMP listener: a socket that sends no CONNECT
within connect-timeout is closed (a half-open or idle client cannot hold a connection for
ever), and max-connections / max-connections-per-address turn new sockets away. Real
sockets on the test's own event loop; the broker's clock is a fake one the test moves."""

from __future__ import annotations

import asyncio

from broker_core.core_support import FakeClock
from mqtt_pair import connect_packet

from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.connection_limits import ConnectionLimits
from jmspy.broker_ref.protocols.mqtt.server import TICK_S, MqttServer

WAIT = 10.0


async def _closed(reader: asyncio.StreamReader) -> bool:
    """The server closed the socket (EOF) within WAIT seconds."""
    try:
        return await asyncio.wait_for(reader.read(1), WAIT) == b""
    except ConnectionResetError:
        return True


async def _connack(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   client_id: str) -> bytes:
    writer.write(connect_packet(client_id))
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(4), WAIT)


def test_a_socket_without_connect_is_closed_after_the_connect_timeout() -> None:
    async def main() -> None:
        clock = FakeClock()
        broker = Broker(clock=clock)
        server = MqttServer(broker, limits=ConnectionLimits(connect_timeout=5.0))
        host, port = await server.start("127.0.0.1", 0)
        try:
            silent_r, silent_w = await asyncio.open_connection(host, port)
            talker_r, talker_w = await asyncio.open_connection(host, port)
            assert (await _connack(talker_r, talker_w, "talker"))[0] == 0x20
            clock.now += 5_001  # past connect-timeout on the broker's clock
            assert await _closed(silent_r)  # closed on the next tick (every TICK_S)
            # the client that did CONNECT stays (keep-alive 0: no deadline of its own)
            await asyncio.sleep(2 * TICK_S)  # two more ticks pass over it
            assert not talker_r.at_eof()
            usage = broker.usage()
            assert usage["connectionsClosedConnectTimeout"] == 1
            for w in (silent_w, talker_w):
                w.close()
        finally:
            await server.stop()
            broker.close()

    asyncio.run(main())


def test_the_per_address_cap_turns_new_sockets_away_and_counts_them() -> None:
    async def main() -> None:
        broker = Broker(clock=FakeClock())
        server = MqttServer(broker, limits=ConnectionLimits(max_connections=3,
                                                            max_connections_per_address=2))
        host, port = await server.start("127.0.0.1", 0)
        writers = []
        try:
            first = [await asyncio.open_connection(host, port) for _ in range(2)]
            writers += [w for _, w in first]
            for i, (r, w) in enumerate(first):
                assert (await _connack(r, w, f"ok{i}"))[0] == 0x20
            third_r, third_w = await asyncio.open_connection(host, port)
            writers.append(third_w)
            assert await _closed(third_r)  # a third from 127.0.0.1: over the cap of 2
            assert broker.usage()["connectionsRefusedPerAddress"] == 1
            for w in writers[:1]:  # one leaves: its address may come in again
                w.close()
                await w.wait_closed()
            await asyncio.sleep(TICK_S)  # the server sees the close (connection_lost)
            again_r, again_w = await asyncio.open_connection(host, port)
            writers.append(again_w)
            assert (await _connack(again_r, again_w, "again"))[0] == 0x20
        finally:
            for w in writers:
                w.close()
            await server.stop()
            broker.close()

    asyncio.run(main())
