"""jmspy.aio across what production does to a broker: the bundled broker killed (SIGKILL)
and started again on its data directory, and a connection moving along its
``imqAddressList`` when the broker it is on dies. The same ``async for`` carries on in
both, as the sync API's listener does (test_failover.py, test_address_list_failover.py):
the core reconnects, the exception listener hears CONNECTION_INTERRUPTED then
CONNECTION_RESUMED, and what the dead connection held unsettled comes back marked where
the broker kept it."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from aio_support import run
from jmspy_process import JmspyBroker
from jmspy_process import stored_broker as stored_broker  # the fixture

from jmspy import Session, reconnect
from jmspy.aio import AsyncConnectionFactory

FAST = {"imqReconnectEnabled": True, "imqReconnectInterval": 100, "imqReconnectAttempts": 150}


@pytest.fixture(autouse=True)
def _prompt_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cap the doubling backoff at 1 s (as test_failover.py does): the doubling would only
    add idle waiting once the broker is back."""
    monkeypatch.setattr(reconnect, "MAX_INTERVAL", 1.0)



async def _until(codes: list[str], code: str, task: asyncio.Task[None]) -> None:
    async with asyncio.timeout(90):
        while code not in codes:
            assert not task.done(), task
            await asyncio.sleep(0.05)  # waits for the core's reconnect to report


def test_async_for_carries_on_across_a_broker_killed_and_restarted(
        stored_broker: JmspyBroker) -> None:
    """Three persistent messages received by ``async for`` and held unacknowledged
    (CLIENT_ACKNOWLEDGE) when the broker is SIGKILLed; started again on its store, the
    broker gives them back marked redelivered, and the same loop then receives what is
    sent after the restart."""
    broker = stored_broker

    async def main() -> None:
        codes: list[str] = []
        factory = AsyncConnectionFactory(broker.url, **FAST)
        async with factory.create_connection() as conn:
            conn.set_exception_listener(lambda e: codes.append(e.error_code))
            session = await conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
            queue = session.create_queue(f"aio.restart.{uuid.uuid4().hex[:8]}")
            consumer = await session.create_consumer(queue)
            producer = await session.create_producer(queue)
            conn.start()
            got: list[tuple[str, bool]] = []
            held = asyncio.Event()

            async def consume() -> None:
                async for message in consumer:
                    text = message.text or ""
                    got.append((text, message.redelivered))
                    if len(got) == 3:
                        held.set()  # the three stay unacknowledged across the kill
                    if text == "after-2":
                        await message.acknowledge()
                        return

            task = asyncio.create_task(consume())
            for i in range(3):
                await producer.send(session.create_text_message(f"held-{i}"))
            async with asyncio.timeout(30):
                await held.wait()
            broker.kill()
            await _until(codes, "CONNECTION_INTERRUPTED", task)
            broker.start()
            await _until(codes, "CONNECTION_RESUMED", task)
            for i in range(3):
                await producer.send(session.create_text_message(f"after-{i}"))
            async with asyncio.timeout(60):
                await task
            first, again = got[:3], got[3:]
            assert first == [(f"held-{i}", False) for i in range(3)]
            assert sorted(t for t, r in again if r) == ["held-0", "held-1", "held-2"]
            assert [t for t, r in again if not r] == ["after-0", "after-1", "after-2"]
            assert codes[:2] == ["CONNECTION_INTERRUPTED", "CONNECTION_RESUMED"]

    run(main)


def test_async_for_moves_along_the_address_list(tmp_path: Path) -> None:
    """The broker the connection is on dies for good: the connection moves to the next
    address, the same ``async for`` receives what is sent there, and ``where`` names it."""
    first = JmspyBroker(tmp_path / "first.log")
    second = JmspyBroker(tmp_path / "second.log")
    first.start()
    second.start()
    try:
        async def main() -> None:
            codes: list[str] = []
            # two tries on an address before the next one (the sync test's settings)
            factory = AsyncConnectionFactory(
                imqAddressList=f"{first.url},{second.url}", imqAddressListIterations=20,
                **{**FAST, "imqReconnectInterval": 50, "imqReconnectAttempts": 2})
            async with factory.create_connection() as conn:
                conn.set_exception_listener(lambda e: codes.append(e.error_code))
                session = await conn.create_session()
                queue = session.create_queue(f"aio.move.{uuid.uuid4().hex[:8]}")
                consumer = await session.create_consumer(queue)
                producer = await session.create_producer(queue)
                conn.start()
                got: list[str] = []
                before = asyncio.Event()

                async def consume() -> None:
                    async for message in consumer:
                        got.append(message.text or "")
                        if got[-1] == "before":
                            before.set()
                        if got[-1] == "there-2":
                            return

                task = asyncio.create_task(consume())
                await producer.send(session.create_text_message("before"))
                async with asyncio.timeout(30):
                    await before.wait()
                first.kill()
                await _until(codes, "CONNECTION_RESUMED", task)
                for i in range(3):
                    await producer.send(session.create_text_message(f"there-{i}"))
                async with asyncio.timeout(60):
                    await task
                assert got == ["before", "there-0", "there-1", "there-2"]
                assert str(second.port) in conn.where

        run(main)
    finally:
        first.stop()
        second.stop()
