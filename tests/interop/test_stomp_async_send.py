"""JMS 2.0 asynchronous sends over stomp:// against real brokers (the bundled broker,
ActiveMQ 5, RabbitMQ; started by conftest.py's fixtures, never skipped): every SEND is
written at once, each completion comes once the broker confirmed it, in send order, and
every message arrives."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator

import pytest
from aio_support import run

from jmspy import ConnectionFactory, DeliveryMode, Message
from jmspy.aio import AsyncConnectionFactory
from jmspy.transports.stomp import async_sends

TARGETS = ["jmspy", "activemq", "rabbitmq"]


@pytest.fixture(params=TARGETS)
def stomp_url(request: pytest.FixtureRequest) -> Iterator[str]:
    name: str = request.param
    if name == "jmspy":
        server = request.getfixturevalue("jmspy_stomp_server")
        yield f"stomp://{server.host}:{server.port}"
    elif name == "activemq":
        b = request.getfixturevalue("activemq")
        yield f"stomp://{b.host}:{b.stomp_port}"
    else:
        r = request.getfixturevalue("rabbitmq")
        yield f"stomp://{r.host}:{r.stomp_port}?rabbitmq_queue_selectors=discard"


@pytest.mark.parametrize("mode", [DeliveryMode.PERSISTENT, DeliveryMode.NON_PERSISTENT])
def test_async_sends_complete_in_send_order_and_all_arrive(stomp_url: str, mode: int) -> None:
    count = 900  # past two non-persistent checkpoints (one receipt per 400 sends)
    completed: list[int] = []
    failures: list[Exception] = []
    all_done = threading.Event()

    class Listener:
        def on_completion(self, message: Message) -> None:
            completed.append(message.get_property("n"))  # type: ignore[arg-type]
            if len(completed) == count:
                all_done.set()

        def on_exception(self, message: Message, exception: Exception) -> None:
            failures.append(exception)
            all_done.set()

    name = f"async.send.{uuid.uuid4().hex[:8]}"
    with ConnectionFactory(stomp_url).create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue(name)
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        listener = Listener()
        for n in range(count):
            producer.send(session.create_text_message(f"m{n}", {"n": n}),
                          delivery_mode=mode, completion_listener=listener)
        assert all_done.wait(60), f"{len(completed)} of {count} completed"
        assert failures == []
        assert completed == list(range(count))
        conn.start()
        got = []
        for _ in range(count):
            message = consumer.receive(30)
            assert message is not None, f"only {len(got)} of {count} arrived"
            got.append(message.get_property("n"))
        assert sorted(got) == list(range(count))


@pytest.mark.parametrize("mode", [DeliveryMode.PERSISTENT, DeliveryMode.NON_PERSISTENT])
def test_awaited_sends_past_the_cap_park_on_the_loop_and_all_arrive_in_order(
        stomp_url: str, mode: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``gather`` of more awaited sends than may be unreported (the cap, 10 here): the
    ones past it are parked, not waited for on the loop, and each report (read on the
    loop or by stomp.py's receiver) writes the next, in order."""
    monkeypatch.setattr(async_sends, "CAP", 10)
    count = 300

    async def main() -> None:
        name = f"async.park.{uuid.uuid4().hex[:8]}"
        async with AsyncConnectionFactory(stomp_url).create_connection() as conn:
            session = await conn.create_session()
            queue = session.create_queue(name)
            consumer = await session.create_consumer(queue)
            producer = await session.create_producer(queue)
            sends = [asyncio.ensure_future(producer.send(
                session.create_text_message(f"m{n}", {"n": n}), delivery_mode=mode))
                for n in range(count)]
            await asyncio.sleep(0)  # every send's first step has run
            ledger = conn.sync._transport._receipts.async_sends
            if mode == DeliveryMode.PERSISTENT:  # a loop that waited would hold <= 10
                assert ledger.unreported > 10
            await asyncio.gather(*sends)
            assert ledger.unreported == 0
            conn.start()
            got = []
            for _ in range(count):
                message = await consumer.receive(timeout=30)
                assert message is not None, f"only {len(got)} of {count} arrived"
                got.append(message.get_property("n"))
            assert got == list(range(count))

    run(main)
