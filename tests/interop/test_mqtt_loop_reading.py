"""jmspy.aio over ``mqtt://`` reads its socket on the event loop while paho's network
thread lends it the reading (transports/mqtt/lent_reading.py), and paho's thread still
does what only it does: it reads while the loop is stalled, it writes what paho queued
(a SUBSCRIBE) and it keeps the connection alive (PINGREQ) while the loop holds the turn.

Against the real Mosquitto of conftest.py, on loopback."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest
from aio_support import run, text_of

from jmspy import ConnectionFactory, DeliveryMode
from jmspy.aio import AsyncConnection, AsyncConnectionFactory
from jmspy.transports import reading_turn
from jmspy.transports.mqtt import paho_private
from jmspy.transports.mqtt.outbound import Outbound

#: jmspy's paho steps are on (off: JMSPY_LIBRARY_HOOKS=0 or an untested paho), so paho's
#: thread lends the reading; off, it reads everything and lends nothing
LENDS = paho_private.enabled()


def _topic(what: str) -> str:
    return f"aio/loopread/{what}/{uuid.uuid4().hex[:8]}"


async def _stream(conn: AsyncConnection, count: int) -> list[str]:
    """``count`` awaited QoS 1 sends to a topic and an ``async for`` over it, one
    connection; the texts in the order received."""
    session = await conn.create_session()
    sending = await conn.create_session()
    topic = session.create_topic(_topic("stream"))
    consumer = await session.create_consumer(topic)
    producer = await sending.create_producer(topic)
    conn.start()

    async def produce() -> None:
        for i in range(count):
            await producer.send(sending.create_text_message(str(i)))

    task = asyncio.create_task(produce())
    got: list[str] = []
    async for message in consumer:
        got.append(text_of(message))
        if len(got) == count:
            break
    await task
    return got


async def _holding(conn: AsyncConnection) -> None:
    """Stream until the loop holds the turn (with jmspy's paho steps on), so what
    follows happens while it is lent; paho's thread may have taken it back (a loop
    stalled by the machine, the keep-alive look) at the end of any one stream."""
    await _stream(conn, 50)
    for _ in range(20):
        if not LENDS or conn._reading.holding:
            return
        await _stream(conn, 5)
    raise AssertionError("the loop was never lent the reading")


def test_an_async_connection_reads_its_packets_on_the_loop(mosquitto: Any) -> None:
    async def main() -> None:
        factory = AsyncConnectionFactory(f"mqtt://{mosquitto.host}:{mosquitto.mqtt_port}")
        async with factory.create_connection() as conn:
            got = await _stream(conn, 300)
            assert got == [str(i) for i in range(300)]
            reading = conn._reading
            if LENDS:
                assert reading.lends >= 1 and reading.reads >= 1, (reading.lends,
                                                                    reading.reads)
            else:
                assert reading.lends == 0 and reading.reads == 0

    run(main)


def test_a_stalled_loop_does_not_stop_the_connection(mosquitto: Any) -> None:
    """The loop holds the turn and then blocks (the application's mistake); a sync send
    on the same connection from another thread, which waits for its PUBACK, completes
    while the loop is still blocked: paho's thread took the reading back."""
    async def main() -> None:
        factory = AsyncConnectionFactory(f"mqtt://{mosquitto.host}:{mosquitto.mqtt_port}")
        async with factory.create_connection() as conn:
            await _holding(conn)
            sync_session = conn.sync.create_session()
            producer = sync_session.create_producer(sync_session.create_topic(_topic("side")))
            done = threading.Event()

            def send() -> None:
                producer.send(sync_session.create_text_message("while stalled"),
                              delivery_mode=DeliveryMode.PERSISTENT)  # waits for PUBACK
                done.set()

            sender = threading.Thread(target=send)
            sender.start()
            confirmed_while_stalled = done.wait(30)  # blocks the loop: the stall
            sender.join(30)
            assert confirmed_while_stalled

    run(main)


def test_a_subscribe_while_the_loop_holds_the_turn_completes(mosquitto: Any) -> None:
    """paho queues a SUBSCRIBE for its own thread to write; with the turn lent, that
    thread takes it back to write it, so the consumer is made and receives."""
    async def main() -> None:
        factory = AsyncConnectionFactory(f"mqtt://{mosquitto.host}:{mosquitto.mqtt_port}")
        async with factory.create_connection() as conn:
            await _holding(conn)
            session = await conn.create_session()
            topic = session.create_topic(_topic("late"))
            consumer = await asyncio.wait_for(session.create_consumer(topic), 30)
            producer = await session.create_producer(topic)
            await producer.send(session.create_text_message("late"))
            message = await consumer.receive(timeout=30)
            assert message is not None and text_of(message) == "late"

    run(main)


def test_the_keepalive_goes_on_while_the_loop_reads_a_stream(mosquitto: Any) -> None:
    """keepalive=1: Mosquitto drops a client it hears nothing from for 1.5 s (it looks
    every few seconds: a silent client of keepalive 1 is closed after about 5.7 s here).
    The async connection only receives, for 9 s, a QoS 0 stream another connection sends
    (nothing to acknowledge, so it says nothing itself), read on the loop; paho's thread,
    waiting for the turn, takes it back each second for its keep-alive look and sends
    PINGREQ, so the connection is never dropped."""
    async def main() -> None:
        url = f"mqtt://{mosquitto.host}:{mosquitto.mqtt_port}"
        async with AsyncConnectionFactory(f"{url}?keepalive=1").create_connection() as conn:
            codes: list[str] = []
            conn.set_exception_listener(lambda e: codes.append(e.error_code))
            await _holding(conn)
            session = await conn.create_session()
            topic = session.create_topic(_topic("quiet"))
            consumer = await session.create_consumer(topic)
            stop = threading.Event()

            def stream() -> None:  # another connection, non-persistent: QoS 0
                with ConnectionFactory(url).create_connection() as other:
                    sender = other.create_session()
                    producer = sender.create_producer(topic)
                    i = 0
                    while not stop.wait(0.05):  # a message every 50 ms
                        producer.send(sender.create_text_message(str(i)),
                                      delivery_mode=DeliveryMode.NON_PERSISTENT)
                        i += 1

            streamer = threading.Thread(target=stream)
            streamer.start()
            received = 0
            started = time.monotonic()
            try:
                while time.monotonic() - started < 9.0:
                    if await consumer.receive(timeout=1.0) is not None:
                        received += 1
            finally:
                stop.set()
                await asyncio.to_thread(streamer.join, 30)
            assert received > 0
            assert codes == [], codes
            got = await _stream(conn, 10)  # and it still works
            assert got == [str(i) for i in range(10)]

    run(main)


def test_a_loop_that_fills_its_send_window_parks_its_sends_and_never_waits_on_it(
        mosquitto: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """300 sends at once (``gather``) through a window of 10: the 11th and later are
    parked, not waited for on the loop's own thread (which would have to give the reading
    back to paho's thread for every full window), and each PUBACK, read on the loop or by
    paho's thread, writes the next. With ``LOOP_TICK`` at 60 s nothing takes a stalled
    turn back, so a loop that waited could only wait for its own reads."""
    monkeypatch.setattr(reading_turn, "LOOP_TICK", 60.0)

    def no_wait(self: Outbound) -> None:
        raise AssertionError("a send on the event loop waited for room in the window")

    monkeypatch.setattr(Outbound, "_wait_for_room", no_wait)

    async def main() -> None:
        factory = AsyncConnectionFactory(
            f"mqtt://{mosquitto.host}:{mosquitto.mqtt_port}?send_window=10")
        async with factory.create_connection() as conn:
            await _holding(conn)
            session = await conn.create_session()
            topic = session.create_topic(_topic("window"))
            consumer = await session.create_consumer(topic)
            producer = await session.create_producer(topic)
            sends = [asyncio.ensure_future(producer.send(session.create_text_message(str(i))))
                     for i in range(300)]
            await asyncio.sleep(0)  # every send's first step has run
            outbound = conn.sync._transport.outbound
            assert outbound.parked_sends > 0  # a loop that waited would park none
            await asyncio.gather(*sends)
            assert outbound.parked_sends == 0 and outbound.free_places == 10
            got = []
            for _ in range(300):
                message = await consumer.receive(timeout=30)
                assert message is not None
                got.append(text_of(message))
            assert got == [str(i) for i in range(300)]

    run(main)
