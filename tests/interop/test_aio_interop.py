"""jmspy.aio against real brokers: the bundled broker over stomp://, ActiveMQ and
RabbitMQ over stomp://, Mosquitto over mqtt:// (started by conftest.py's fixtures, never
skipped). The same face over the same core as on vm://: a round trip, a flood held to the
flow window under a slow ``async for``, random cancellation losing nothing, a failed
``process()`` redelivered marked, and an ``async for`` that carries on across a severed
connection (through tcp_relay.py's relay) once the core has reconnected."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from aio_support import assert_copies_marked, process_recorded, run, send_outcomes, text_of
from tcp_relay import relay

from jmspy import JMSException
from jmspy.aio import AsyncConnectionFactory, AsyncSession
from jmspy.destinations import Destination

FAST = {"imqReconnectEnabled": True, "imqReconnectInterval": 200, "imqReconnectAttempts": 90}


@dataclass
class AioTarget:
    name: str
    scheme: str
    host: str
    port: int
    query: str = ""

    @property
    def mqtt(self) -> bool:
        return self.scheme == "mqtt"

    def url(self, host: str | None = None, port: int | None = None) -> str:
        return f"{self.scheme}://{host or self.host}:{port or self.port}{self.query}"

    def factory(self, **props: Any) -> AsyncConnectionFactory:
        return AsyncConnectionFactory(self.url(), **props)

    def destination(self, session: AsyncSession, name: str) -> Destination:
        """A queue; on MQTT a topic (subscribed before anything is sent to it)."""
        return session.create_topic(name) if self.mqtt else session.create_queue(name)


AIO_TARGETS = ["stomp-jmspy", "stomp-activemq", "stomp-rabbitmq", "mqtt-mosquitto"]


@pytest.fixture(params=AIO_TARGETS)
def aio_target(request: pytest.FixtureRequest) -> Iterator[AioTarget]:
    name: str = request.param
    if name == "stomp-jmspy":
        server = request.getfixturevalue("jmspy_stomp_server")
        yield AioTarget(name, "stomp", server.host, server.port)
    elif name == "stomp-activemq":
        b = request.getfixturevalue("activemq")
        yield AioTarget(name, "stomp", b.host, b.stomp_port)
    elif name == "stomp-rabbitmq":
        r = request.getfixturevalue("rabbitmq")
        yield AioTarget(name, "stomp", r.host, r.stomp_port, "?rabbitmq_queue_selectors=discard")
    else:
        m = request.getfixturevalue("mosquitto")
        yield AioTarget(name, "mqtt", m.host, m.mqtt_port)


def _name(what: str) -> str:
    return f"aio.{what}.{uuid.uuid4().hex[:8]}"


def test_round_trip_and_a_failed_process_redelivers_marked(aio_target: AioTarget) -> None:
    async def main() -> None:
        async with aio_target.factory().create_connection() as conn:
            session = await conn.create_session()
            where = aio_target.destination(session, _name("rt"))
            consumer = await session.create_consumer(where)
            producer = await session.create_producer(where)
            conn.start()
            for i in range(20):
                await producer.send(session.create_text_message(f"m{i}", {"n": i}))
            got = []
            async for message in consumer.messages(timeout=10):
                async with message.process():
                    got.append((text_of(message), message.get_property("n")))
                if len(got) == 20:
                    break
            assert got == [(f"m{i}", i) for i in range(20)]
            await producer.send(session.create_text_message("fails once"))
            first = await consumer.receive(timeout=10)
            assert first is not None and not first.redelivered
            with pytest.raises(RuntimeError):
                async with first.process():
                    raise RuntimeError("handler failed")
            again = await consumer.receive(timeout=10)
            assert again is not None and text_of(again) == "fails once" and again.redelivered
            async with again.process():
                pass
            assert await consumer.receive(timeout=0.3) is None

    run(main)


def test_a_flood_into_a_slow_async_for_stays_within_the_flow_limit(
        aio_target: AioTarget) -> None:
    limit, total = 20, 400

    async def main() -> None:
        factory = aio_target.factory(imqConsumerFlowLimit=limit)
        async with factory.create_connection() as conn:
            session = await conn.create_session()
            sending = await conn.create_session()
            where = aio_target.destination(session, _name("flood"))
            consumer = await session.create_consumer(where)
            producer = await sending.create_producer(where)
            backlog = 5 * limit  # a network consumer keeps up with one awaited send
            for i in range(backlog):  # at a time: a backlog fills the window at once
                await producer.send(sending.create_text_message(str(i)))
            conn.start()

            async def flood() -> None:
                for i in range(backlog, total):
                    await producer.send(sending.create_text_message(str(i)))

            flooding = asyncio.create_task(flood())
            seen: list[int] = []
            most = 0
            async for message in consumer.messages(timeout=30):
                stats = consumer.flow_stats()
                most = max(most, stats.unconsumed)
                assert stats.unconsumed <= limit and stats.buffered <= limit, stats
                seen.append(int(text_of(message)))
                for _ in range(5):
                    await asyncio.sleep(0)
                if len(seen) == total:
                    break
            await flooding
            assert seen == list(range(total))  # nothing dropped, in order
            assert most == limit

    run(main)


def test_random_cancellation_loses_nothing(aio_target: AioTarget) -> None:
    total = 120
    rng = random.Random(7)

    async def main() -> None:
        async with aio_target.factory(imqConsumerFlowLimit=10).create_connection() as conn:
            session = await conn.create_session()
            where = aio_target.destination(session, _name("cancel"))
            consumer = await session.create_consumer(where)
            producer = await session.create_producer(where)
            conn.start()
            for i in range(total):
                await producer.send(session.create_text_message(str(i)))
            seen: list[tuple[str, bool]] = []
            done: list[str] = []

            async def worker() -> None:
                while True:
                    await process_recorded(await consumer.receive(), rng, seen, done)

            rounds = 0
            while len(set(done)) < total:
                rounds += 1
                assert rounds < 20_000, f"no progress: {len(set(done))} of {total}"
                task = asyncio.create_task(worker())
                for _ in range(rng.randint(0, 40)):
                    await asyncio.sleep(0)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            assert sorted(done, key=int) == [str(i) for i in range(total)]  # once each
            assert_copies_marked(seen)
            assert await consumer.receive(timeout=0.3) is None

    run(main)


def test_async_for_carries_on_across_a_severed_connection(aio_target: AioTarget) -> None:
    """The relay cuts the connection; the core reconnects (CONNECTION_INTERRUPTED, then
    CONNECTION_RESUMED to the exception listener) and the same ``async for`` receives
    what is sent after. A message held unsettled across the cut comes back marked
    (STOMP brokers take back what a dead connection did not acknowledge)."""
    async def main() -> None:
        with relay(aio_target.host, aio_target.port) as cut:
            port = cut.port
            factory = AsyncConnectionFactory(aio_target.url("127.0.0.1", port), **FAST)
            codes: list[str] = []
            async with factory.create_connection() as conn, \
                    aio_target.factory().create_connection() as direct:
                conn.set_exception_listener(lambda e: codes.append(e.error_code))
                session = await conn.create_session()
                where = aio_target.destination(session, _name("sever"))
                consumer = await session.create_consumer(where)
                sender = await direct.create_session()
                producer = await sender.create_producer(where)
                conn.start()
                got: list[tuple[str, bool]] = []
                arrived, release = asyncio.Event(), asyncio.Event()

                async def consume() -> None:
                    async for message in consumer:
                        got.append((text_of(message), message.redelivered))
                        if not got[-1][1] and got[-1][0] == "before":
                            arrived.set()
                            await release.wait()  # held, unsettled, across the cut
                        if text_of(message) == "after-2":
                            return

                loop_task = asyncio.create_task(consume())
                await producer.send(sender.create_text_message("before"))
                await arrived.wait()
                assert cut.sever() >= 1
                while "CONNECTION_RESUMED" not in codes:
                    assert not loop_task.done()
                    await asyncio.sleep(0.05)
                release.set()  # its acknowledgement is a no-op now: its tag died
                for i in range(3):
                    await producer.send(sender.create_text_message(f"after-{i}"))
                async with asyncio.timeout(60):
                    await loop_task
                texts = [t for t, _ in got]
                assert texts[0] == "before" and texts[-3:] == ["after-0", "after-1", "after-2"]
                if not aio_target.mqtt:
                    assert ("before", True) in got, got  # back after the cut, marked
                assert codes[:2] == ["CONNECTION_INTERRUPTED", "CONNECTION_RESUMED"]

    run(main)


def test_a_lost_connection_ends_async_for_with_its_error(aio_target: AioTarget) -> None:
    """Reconnecting off: the cut loses the connection for good, and the ``async for``
    raises the JMSException (CONNECTION_LOST) rather than ending silently."""
    async def main() -> None:
        with relay(aio_target.host, aio_target.port) as cut:
            port = cut.port
            factory = AsyncConnectionFactory(aio_target.url("127.0.0.1", port),
                                             imqReconnectEnabled=False)
            async with factory.create_connection() as conn:
                session = await conn.create_session()
                consumer = await session.create_consumer(
                    aio_target.destination(session, _name("lost")))
                conn.start()

                async def consume() -> None:
                    async for _ in consumer:
                        pass

                task = asyncio.create_task(consume())
                for _ in range(5):
                    await asyncio.sleep(0)
                cut.sever()
                with pytest.raises(JMSException) as lost:
                    async with asyncio.timeout(60):
                        await task
                assert lost.value.error_code == "CONNECTION_LOST"

    run(main)


def test_an_awaited_send_raises_what_the_broker_refused() -> None:
    """A scripted MQTT 5 broker refuses every second PUBLISH (PUBACK 0x87) and drops the
    connection after the fourth: each ``await producer.send()`` raises its own outcome."""
    from test_mqtt_async_send import _ScriptedBroker

    broker = _ScriptedBroker(acked=3, total=4)

    async def main() -> list[str | None]:
        factory = AsyncConnectionFactory(f"mqtt://127.0.0.1:{broker.port}?version=5",
                                         imqReconnectEnabled=False)
        conn = await factory.create_connection()
        try:
            session = await conn.create_session()
            producer = await session.create_producer(session.create_topic("scripted.aio"))
            return await send_outcomes(session, producer, 4)
        finally:
            await conn.close()

    outcomes = run(main)
    assert outcomes[0] is None and outcomes[2] is None
    assert outcomes[1] is not None and "refused" in outcomes[1]
    assert outcomes[3] is not None and "dropped" in outcomes[3]


def test_an_awaited_send_during_a_reconnect_waits_without_stopping_the_loop(
        aio_target: AioTarget) -> None:
    """The relay cuts the connection and refuses the reconnects until the test lets them
    through. Sends awaited meanwhile are parked (the loop runs on: this task gets its
    turn back while they are pending, which it could not if a send had waited on the
    loop's thread for a reconnect the refusing relay never lets finish); once the
    reconnect is through they are written in send order and every one arrives."""
    async def main() -> None:
        with relay(aio_target.host, aio_target.port) as cut:
            factory = AsyncConnectionFactory(aio_target.url("127.0.0.1", cut.port), **FAST)
            codes: list[str] = []
            async with factory.create_connection() as conn, \
                    aio_target.factory().create_connection() as direct:
                conn.set_exception_listener(lambda e: codes.append(e.error_code))
                listening = await direct.create_session()
                session = await conn.create_session()
                where = aio_target.destination(session, _name("parked"))
                consumer = await listening.create_consumer(where)
                producer = await session.create_producer(where)
                direct.start()
                await producer.send(session.create_text_message("before"))
                cut.refusing.set()
                assert cut.sever() >= 1
                while "CONNECTION_INTERRUPTED" not in codes:
                    await asyncio.sleep(0.01)  # the drop reaching the exception listener
                sends = [asyncio.ensure_future(producer.send(
                    session.create_text_message(f"during-{i}"))) for i in range(20)]
                await asyncio.sleep(0)  # every send's first step has run
                assert not any(s.done() for s in sends)  # none written: the relay refuses
                cut.refusing.clear()
                async with asyncio.timeout(60):
                    await asyncio.gather(*sends)
                got = []
                for _ in range(21):
                    message = await consumer.receive(timeout=30)
                    assert message is not None, f"only {got} arrived"
                    got.append(text_of(message))
                assert got == ["before"] + [f"during-{i}" for i in range(20)]
                assert codes[:2] == ["CONNECTION_INTERRUPTED", "CONNECTION_RESUMED"]

    run(main)
