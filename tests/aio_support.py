"""What the asyncio tests share: a fresh in-process broker per test, a runner that
bounds a failing test (the bound never decides a passing one), and the steps of the
random-cancellation tests (in-process and against real brokers)."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from jmspy.aio import (
    AsyncConnection,
    AsyncConnectionFactory,
    AsyncMessage,
    AsyncMessageConsumer,
    AsyncMessageProducer,
    AsyncSession,
)
from jmspy.destinations import Queue
from jmspy.errors import JMSException

T = TypeVar("T")

#: how long a failing test may hang before it is reported
GUARD = 60.0


def run(main: Callable[[], Awaitable[T]], *, debug: bool = False,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> T:
    async def guarded() -> T:
        async with asyncio.timeout(GUARD):
            return await main()

    with asyncio.Runner(debug=debug, loop_factory=loop_factory) as runner:
        return runner.run(guarded())


@contextmanager
def vm_factory(broker: dict[str, Any] | None = None, **properties: Any
               ) -> Iterator[AsyncConnectionFactory]:
    """A fresh in-process broker (``broker``: its core options) and a factory for it."""
    from jmspy.transports import vm

    name = f"aio-{uuid.uuid4().hex[:12]}"
    vm.start_broker(name, **(broker or {}))
    try:
        yield AsyncConnectionFactory(f"vm://{name}", **properties)
    finally:
        vm.stop_broker(name)


async def queue_ends(conn: AsyncConnection, name: str, **session_options: Any
                     ) -> tuple[AsyncSession, Queue, AsyncMessageProducer, AsyncMessageConsumer]:
    """A session (``session_options``), its queue ``name``, a producer and a consumer of
    that queue, and the connection started: what most of these tests begin with."""
    session = await conn.create_session(**session_options)
    queue = session.create_queue(name)
    producer = await session.create_producer(queue)
    consumer = await session.create_consumer(queue)
    conn.start()
    return session, queue, producer, consumer


async def send_outcomes(session: AsyncSession, producer: AsyncMessageProducer, count: int
                        ) -> list[str | None]:
    """Await ``count`` sends of "m0", "m1", ...: None for each that completed, else its
    exception as "ClassName: text"."""
    outcomes: list[str | None] = []
    for i in range(count):
        try:
            await producer.send(session.create_text_message(f"m{i}"))
            outcomes.append(None)
        except JMSException as exc:
            outcomes.append(f"{type(exc).__name__}: {exc}")
    return outcomes


def text_of(message: AsyncMessage) -> str:
    """The text of a TextMessage (failing the test on any other)."""
    text = message.text
    assert text is not None
    return text


async def process_recorded(message: AsyncMessage | None, rng: random.Random,
                           seen: list[tuple[str, bool]], done: list[str]) -> None:
    """Record ``message`` in ``seen`` as (text, redelivered), then handle it in
    ``process()`` over a random 0-2 loop turns (each a place a cancel can land) and record
    it in ``done`` once that completed."""
    assert message is not None
    seen.append((text_of(message), message.redelivered))
    async with message.process():
        for _ in range(rng.randint(0, 2)):
            await asyncio.sleep(0)
        done.append(text_of(message))


def assert_copies_marked(seen: list[tuple[str, bool]]) -> None:
    """Every copy of a text after its first in ``seen`` is marked redelivered."""
    firsts: set[str] = set()
    for text, redelivered in seen:
        assert redelivered or text not in firsts, f"{text} came again unmarked"
        firsts.add(text)
