"""jmspy.aio under cancellation and load: tasks cancelled at random await points of a
receive loop lose no message (a duplicate only ever comes marked JMSRedelivered), and
nothing the face does holds the event loop (asyncio's slow-callback detector, with
the machine's load told apart from a step that waited)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter

import pytest
from aio_support import assert_copies_marked, process_recorded, run, text_of, vm_factory
from loop_hold_meter import LoopHoldMeter

from jmspy.aio import AsyncMessage, AsyncMessageConsumer, AsyncSession

TOTAL = 300


async def _fill(session: AsyncSession, name: str, total: int) -> None:
    producer = await session.create_producer(session.create_queue(name))
    for i in range(total):
        await producer.send(session.create_text_message(str(i)))


async def _cancel_after(task: asyncio.Task[None], steps: int) -> None:
    """Cancel ``task`` after ``steps`` turns of the loop (so at whatever await point it
    happens to be: waiting in receive(), yielding in it, in a body, inside process())."""
    for _ in range(steps):
        await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


@pytest.mark.parametrize("seed", [1, 2, 3, "uvloop"])
@pytest.mark.parametrize("style", ["process", "async-for", "timeout"])
def test_random_cancellation_loses_nothing_and_marks_every_duplicate(
        seed: int | str, style: str) -> None:
    """(seed ``uvloop``: seed 4 on uvloop's loop, whose cancellation and call_soon order
    differ in detail from asyncio's.)"""
    loop_factory = None
    if seed == "uvloop":
        loop_factory = pytest.importorskip("uvloop").new_event_loop
        seed = 4
    rng = random.Random(seed)

    async def main() -> None:
        with vm_factory(imqConsumerFlowLimit=25) as factory:
            async with factory.create_connection() as conn:
                session = await conn.create_session()
                await _fill(session, "cancel", TOTAL)
                consumer = await session.create_consumer(session.create_queue("cancel"))
                conn.start()
                seen: list[tuple[str, bool]] = []  # handed to the application
                done: list[str] = []  # process() blocks that completed

                async def worker() -> None:
                    if style == "async-for":
                        async for message in consumer:
                            seen.append((text_of(message), message.redelivered))
                            for _ in range(rng.randint(0, 2)):
                                await asyncio.sleep(0)
                            done.append(text_of(message))
                        return
                    while True:
                        if style == "timeout":
                            async with asyncio.timeout(rng.choice([0, None])):
                                got = await consumer.receive()
                        else:
                            got = await consumer.receive()
                        await process_recorded(got, rng, seen, done)

                def progress() -> int:  # async-for: seen; else process() completed
                    return len({t for t, _ in seen} if style == "async-for" else set(done))

                rounds = 0
                while progress() < TOTAL:
                    rounds += 1
                    assert rounds < 20_000, f"no progress: {progress()} of {TOTAL}"
                    task = asyncio.create_task(worker())
                    try:
                        await _cancel_after(task, rng.randint(0, 12))
                    except TimeoutError:  # the "timeout" style's asyncio.timeout(0)
                        pass
                    assert consumer.flow_stats().unconsumed <= 25
                wanted = {str(i) for i in range(TOTAL)}
                assert {text for text, _ in seen} == wanted  # none lost
                copies = Counter(text for text, _ in seen)
                assert_copies_marked(seen)
                if style == "async-for":
                    # a body cancelled before it finished still had its message: AUTO
                    # acknowledges it when the next one is asked for, so no copies
                    assert max(copies.values()) == 1
                else:
                    assert Counter(done) == Counter(wanted)  # each processed exactly once
                    assert sum(copies.values()) > TOTAL  # cancellations did hit process()
                # the connection stays usable, and nothing is left behind
                await _fill(session, "cancel", 1)
                last = await consumer.receive(timeout=10)
                assert last is not None and text_of(last) == "0" and not last.redelivered
                await consumer.close()
                assert conn.sync.destination_stats(
                    session.create_queue("cancel"))["messageCount"] == 0

    run(main, loop_factory=loop_factory)


class _SlowCallbacks(logging.Handler):
    """asyncio's debug-mode report of a callback that took too long by the wall clock,
    kept when the step held the loop (waited on something) and excused when the
    machine's load explains it (the CPU run queue, another thread's GC or preemption
    while it held the GIL): see loop_hold_meter."""

    def __init__(self, meter: LoopHoldMeter) -> None:
        super().__init__(logging.WARNING)
        self.meter = meter
        self.reports: list[str] = []
        self.excused: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not message.startswith("Executing"):
            return
        step = self.meter.last  # the step asyncio timed has just returned
        if step is None or step.held > self.meter.limit:
            self.reports.append(f"{message} ({step or 'not measured'})")
        else:
            self.excused.append(f"{message} ({step})")


def _detecting(main: object) -> list[str]:
    """Run ``main`` in debug mode with asyncio's detector for callbacks over 0.25 s;
    the reports of steps that held the loop (see _SlowCallbacks)."""
    meter = LoopHoldMeter(limit=0.25)
    detector = _SlowCallbacks(meter)
    logger = logging.getLogger("asyncio")
    logger.addHandler(detector)

    async def detected() -> None:
        asyncio.get_running_loop().slow_callback_duration = meter.limit
        await main()  # type: ignore[operator]

    try:
        with meter.installed():
            run(detected, debug=True)
    finally:
        logger.removeHandler(detector)
    for excused in detector.excused:  # shown with -rA or on a failure, for the record
        print("excused:", excused)
    return detector.reports


def test_the_detector_sees_a_blocking_receive() -> None:
    """The control: the sync API's receive() on the loop holds it, and is reported."""
    async def main() -> None:
        with vm_factory() as factory:
            async with factory.create_connection() as conn:
                session = await conn.create_session()
                consumer = await session.create_consumer(session.create_queue("empty"))
                conn.start()
                assert consumer.sync.receive(timeout=0.5) is None  # blocks the loop

    assert _detecting(main)


def test_nothing_holds_the_loop_under_load() -> None:
    """A web-server-like load: request handlers sending, a flood into a slow consumer,
    listeners, request/reply, a receive waiting on an empty queue, cancellations."""
    async def main() -> None:
        with vm_factory(imqConsumerFlowLimit=50) as factory:
            async with factory.create_connection() as conn:
                session = await conn.create_session()
                queue = session.create_queue("load")
                consumer = await session.create_consumer(queue)
                idle = await session.create_consumer(session.create_queue("idle"))
                listened = await conn.create_session()
                events = await listened.create_consumer(listened.create_queue("events"))
                heard: list[str] = []

                async def on_event(message: AsyncMessage) -> None:
                    heard.append(text_of(message))

                events.set_message_listener(on_event)
                conn.start()

                async def handler(n: int) -> None:  # an HTTP handler that sends
                    sender = await conn.create_session()
                    producer = await sender.create_producer(None)
                    for i in range(40):
                        await producer.send(sender.create_text_message(f"{n}.{i}"), queue)
                        await producer.send(sender.create_text_message("e"),
                                            sender.create_queue("events"))

                async def drain(target: AsyncMessageConsumer, total: int) -> int:
                    n = 0
                    async for message in target:
                        async with message.process():
                            await asyncio.sleep(0)
                        n += 1
                        if n == total:
                            break
                    return n

                async def idle_wait() -> None:
                    assert await idle.receive(timeout=0.6) is None

                async def cancelled_receives() -> None:
                    for _ in range(50):
                        task = asyncio.create_task(idle.receive())
                        await asyncio.sleep(0)
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)

                draining = asyncio.create_task(drain(consumer, 20 * 40))
                await asyncio.gather(*(handler(n) for n in range(20)), idle_wait(),
                                     cancelled_receives())
                assert await draining == 800
                while len(heard) < 800:
                    await asyncio.sleep(0.01)

    assert _detecting(main) == []
