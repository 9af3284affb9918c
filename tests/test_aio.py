"""jmspy.aio on vm://: the face's calls, its buffer bounded by the flow window, closing
from another task, listeners, browsers, request/reply and transactions."""

from __future__ import annotations

import asyncio
import threading

import pytest
from aio_support import queue_ends, run, text_of, vm_factory

from jmspy import ConnectionFactory, JMSException, TextMessage
from jmspy.aio import AsyncConnectionFactory, AsyncMessage, AsyncRequestor, AsyncSession
from jmspy.errors import IllegalStateException


def test_send_receive_async_for_and_timeouts() -> None:
    async def main() -> None:
        with vm_factory() as factory:
            async with factory.create_connection() as conn:
                session = await conn.create_session()
                queue = session.create_queue("round-trip")
                producer = await session.create_producer(queue)
                consumer = await session.create_consumer(queue)
                assert await consumer.receive(timeout=0) is None  # stopped: nothing yet
                conn.start()
                for i in range(10):
                    message = session.create_text_message(f"m{i}", {"n": i})
                    await producer.send(message)
                    assert message.message_id is not None
                first = await consumer.receive(timeout=10)
                assert first is not None and text_of(first) == "m0"
                assert first.get_property("n") == 0 and not first.redelivered
                assert isinstance(first.message, TextMessage)
                got = [text_of(m) async for m in consumer.messages(timeout=0.2)]
                assert got == [f"m{i}" for i in range(1, 10)]
                assert await consumer.receive(timeout=0.05) is None
                assert consumer.receive_no_wait() is None
                stats = consumer.flow_stats()
                assert stats.delivered == 10 and stats.consumed == 10  # AUTO acked all
                assert conn.sync.destination_stats(queue)["messageCount"] == 0

    run(main)


def test_the_factory_refuses_what_the_sync_factory_refuses() -> None:
    with pytest.raises(JMSException, match="imqConsumerFlowLimit"):
        AsyncConnectionFactory("vm://x", imqConsumerFlowLimit=-5)
    with pytest.raises(JMSException) as sync_error:
        ConnectionFactory("nosuch://h:1").create_connection()

    async def main() -> None:
        with pytest.raises(type(sync_error.value), match="nosuch"):
            await AsyncConnectionFactory("nosuch://h:1").create_connection()

    run(main)


def test_a_slow_async_for_never_holds_more_than_the_flow_limit_under_a_flood() -> None:
    limit, total = 20, 1500

    async def main() -> None:
        with vm_factory(imqConsumerFlowLimit=limit, imqConsumerFlowThreshold=50) as factory:
            async with factory.create_connection() as conn:
                session = await conn.create_session()
                sender = await conn.create_session()
                queue = session.create_queue("flood")
                consumer = await session.create_consumer(queue)
                producer = await sender.create_producer(queue)
                conn.start()

                async def flood() -> None:
                    for i in range(total):
                        await producer.send(sender.create_text_message(str(i)))

                flooding = asyncio.create_task(flood())
                seen: list[int] = []
                most_held = 0
                delivering = 0
                async for message in consumer:
                    stats = consumer.flow_stats()
                    most_held = max(most_held, stats.unconsumed, stats.buffered)
                    assert stats.unconsumed <= limit, stats
                    seen.append(int(text_of(message)))
                    for _ in range(3):  # a slow body: the flood outpaces it
                        await asyncio.sleep(0)
                    if len(seen) % 100 == 0:
                        broker = conn.sync.destination_stats(queue)
                        delivering = max(delivering, broker["deliveringCount"])
                        assert broker["deliveringCount"] <= limit, broker
                    if len(seen) == total:
                        break
                await flooding
                assert seen == list(range(total))  # nothing dropped, in order
                assert most_held == limit  # the window filled: the broker held the rest
                assert consumer.flow_stats().pauses > 0

    run(main)


def test_a_send_parked_by_producer_flow_control_waits_without_holding_the_loop() -> None:
    """vm:// sends run on the loop (the broker is in this process) unless producer flow
    control parks one: then the await waits for room while the loop goes on, and a send
    still parked at sendTimeout raises ResourceAllocationException from the await."""
    from jmspy import DeliveryMode, ResourceAllocationException
    from jmspy.broker_ref.core.api import AddressSettings

    body = "x" * 1024
    tight = {"settings": {"orders.#": AddressSettings(memory_limit=64 * 1024)}}

    async def main() -> None:
        with vm_factory(tight) as factory:
            async with factory.create_connection() as conn:
                session = await conn.create_session()
                queue = session.create_queue("orders.eu")
                producer = await session.create_producer(
                    queue, delivery_mode=DeliveryMode.NON_PERSISTENT)
                sent = 0

                async def flood() -> None:
                    nonlocal sent
                    for _ in range(400):  # ~6 times the queue's 64 KB
                        await producer.send(session.create_text_message(body))
                        sent += 1

                flooding = asyncio.create_task(flood())
                turns, still, last = 0, 0, -1
                while still < 50:  # the loop turns on while the flood is parked
                    turns += 1
                    assert turns < 100_000 and not flooding.done(), sent
                    still, last = (still + 1, last) if sent == last else (0, sent)
                    await asyncio.sleep(0)
                assert 40 <= sent < 400  # parked at the queue's limit, not failed
                assert conn.sync.destination_stats(queue)["messageCount"] == sent
                consumer = await session.create_consumer(queue)
                conn.start()
                got = 0
                async for _ in consumer:
                    got += 1
                    if got == 400:
                        break
                await flooding
                assert sent == 400

        with vm_factory(tight, sendTimeout=200) as factory:
            async with factory.create_connection() as conn:
                session = await conn.create_session()
                producer = await session.create_producer(
                    session.create_queue("orders.us"),
                    delivery_mode=DeliveryMode.NON_PERSISTENT)
                with pytest.raises(ResourceAllocationException, match="sendTimeout"):
                    for _ in range(400):
                        await producer.send(session.create_text_message(body))

    run(main)


def test_closing_the_connection_from_another_task_ends_every_async_for() -> None:
    async def main() -> None:
        with vm_factory() as factory:
            conn = await factory.create_connection()
            session = await conn.create_session()
            consumers = [await session.create_consumer(session.create_queue(f"idle{i}"))
                         for i in range(3)]
            other = await conn.create_session()
            receiver = await other.create_consumer(session.create_queue("idle-receive"))
            conn.start()
            waiting = asyncio.Event()

            async def drain(consumer: object) -> int:
                n = 0
                waiting.set()
                async for _ in consumer:  # type: ignore[attr-defined]
                    n += 1
                return n

            loops = [asyncio.create_task(drain(c)) for c in consumers]
            receive = asyncio.create_task(receiver.receive())
            await waiting.wait()
            for _ in range(5):
                await asyncio.sleep(0)
            assert not any(t.done() for t in loops)
            await conn.close()
            assert await asyncio.gather(*loops) == [0, 0, 0]
            assert await receive is None
            with pytest.raises(IllegalStateException, match="closed"):
                await consumers[0].receive()

    run(main)


def test_a_receive_cancelled_while_waiting_strands_no_message() -> None:
    async def main() -> None:
        with vm_factory() as factory:
            async with factory.create_connection() as conn:
                session = await conn.create_session()
                queue = session.create_queue("cancel-wait")
                consumer = await session.create_consumer(queue)
                conn.start()
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.05):
                        await consumer.receive()
                task = asyncio.create_task(consumer.receive())
                await asyncio.sleep(0)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                producer = await session.create_producer(queue)
                await producer.send(session.create_text_message("after"))
                message = await consumer.receive(timeout=10)
                assert message is not None and text_of(message) == "after"
                assert not message.redelivered

    run(main)


def test_waiting_consumers_hold_no_thread_and_each_wakes_for_its_own_message() -> None:
    async def main() -> None:
        with vm_factory() as factory:
            async with factory.create_connection() as conn:
                session = await conn.create_session()
                queues = [session.create_queue(f"idle-{i}") for i in range(20)]
                consumers = [await session.create_consumer(q) for q in queues]
                conn.start()
                before = threading.active_count()
                waits = [asyncio.create_task(c.receive()) for c in consumers]
                for _ in range(3):  # loop turns: each receive reaches its watcher
                    await asyncio.sleep(0)
                assert not any(w.done() for w in waits)
                assert threading.active_count() == before  # no thread per waiting consumer
                sending = await conn.create_session()
                producer = await sending.create_producer(queues[7])
                await producer.send(sending.create_text_message("seven"))
                got = await waits[7]
                assert got is not None and text_of(got) == "seven"
                assert not any(w.done() for i, w in enumerate(waits) if i != 7)
            assert await asyncio.gather(*(w for i, w in enumerate(waits) if i != 7)) == [
                None] * 19  # closing the connection ends every wait

    run(main)


def test_process_acknowledges_on_success_and_redelivers_marked_on_failure() -> None:
    async def main() -> None:
        with vm_factory() as factory:
            async with factory.create_connection() as conn:
                for mode in (AsyncSession.AUTO_ACKNOWLEDGE, AsyncSession.CLIENT_ACKNOWLEDGE,
                             AsyncSession.DUPS_OK_ACKNOWLEDGE,
                             AsyncSession.INDIVIDUAL_ACKNOWLEDGE):
                    session, queue, producer, consumer = await queue_ends(
                        conn, f"process-{mode.name}", ack_mode=mode)
                    await producer.send(session.create_text_message("x"))
                    message = await consumer.receive(timeout=10)
                    assert message is not None and not message.redelivered
                    with pytest.raises(ValueError):
                        async with message.process():
                            raise ValueError("handler failed")
                    again = await consumer.receive(timeout=10)
                    assert again is not None and again.redelivered, mode
                    assert text_of(again) == "x"
                    async with again.process():
                        pass
                    assert await consumer.receive(timeout=0.05) is None
                    await consumer.close()
                    assert conn.sync.destination_stats(queue)["messageCount"] == 0, mode
                    await session.close()

    run(main)


def test_recover_redelivers_the_handed_out_message_in_auto_acknowledge() -> None:
    async def main() -> None:
        with vm_factory() as factory:
            async with factory.create_connection() as conn:
                session, queue, producer, consumer = await queue_ends(conn, "recover")
                await producer.send(session.create_text_message("r"))
                message = await consumer.receive(timeout=10)
                assert message is not None and not message.redelivered
                await session.recover()
                again = await consumer.receive(timeout=10)
                assert again is not None and text_of(again) == "r" and again.redelivered
                assert await consumer.receive(timeout=0.05) is None  # acked by that ask
                assert conn.sync.destination_stats(queue)["messageCount"] == 0

    run(main)


def test_transacted_commit_and_rollback() -> None:
    async def main() -> None:
        with vm_factory() as factory:
            async with factory.create_connection() as conn:
                session, queue, producer, consumer = await queue_ends(conn, "tx", transacted=True)
                await producer.send(session.create_text_message("t"))
                assert await consumer.receive(timeout=0.05) is None  # not committed
                await session.commit()
                message = await consumer.receive(timeout=10)
                assert message is not None and not message.redelivered
                await session.rollback()
                again = await consumer.receive(timeout=10)
                assert again is not None and again.redelivered and text_of(again) == "t"
                await session.commit()
                assert conn.sync.destination_stats(queue)["messageCount"] == 0

    run(main)


def test_async_listeners_run_one_at_a_time_per_session_and_failures_redeliver() -> None:
    async def main() -> None:
        with vm_factory() as factory:
            async with factory.create_connection() as conn:
                errors: list[JMSException] = []
                conn.set_exception_listener(errors.append)
                session = await conn.create_session()
                queues = [session.create_queue(f"listen{i}") for i in range(2)]
                consumers = [await session.create_consumer(q) for q in queues]
                running = 0
                most = 0
                handled: list[tuple[str, bool]] = []
                done = asyncio.Event()

                async def on_message(message: AsyncMessage) -> None:
                    nonlocal running, most
                    running += 1
                    most = max(most, running)
                    try:
                        await asyncio.sleep(0)
                        await asyncio.sleep(0)
                        handled.append((text_of(message), message.redelivered))
                        if text_of(message) == "fail" and not message.redelivered:
                            raise RuntimeError("first try fails")
                    finally:
                        running -= 1
                    if len(handled) == 22:
                        done.set()

                for consumer in consumers:
                    consumer.set_message_listener(on_message)
                with pytest.raises(IllegalStateException, match="listener"):
                    await consumers[0].receive()
                conn.start()
                producer = await session.create_producer(None)
                for i in range(10):
                    for queue in queues:
                        await producer.send(session.create_text_message(str(i)), queue)
                await producer.send(session.create_text_message("fail"), queues[0])
                await done.wait()
                assert most == 1
                assert ("fail", False) in handled and ("fail", True) in handled
                assert [e.error_code for e in errors] == ["LISTENER_FAILED"]
                consumers[0].set_message_listener(None)
                await producer.send(session.create_text_message("sync"), queues[0])
                message = await consumers[0].receive(timeout=10)
                assert message is not None and text_of(message) == "sync"

    run(main)


def test_browsers_iterate_and_temporary_queues_carry_request_reply() -> None:
    async def main() -> None:
        with vm_factory() as factory:
            async with factory.create_connection() as conn:
                session = await conn.create_session()
                queue = session.create_queue("browse")
                producer = await session.create_producer(queue)
                for i in range(250):
                    await producer.send(session.create_text_message(str(i)))
                browser = await session.create_browser(queue, "JMSPriority = 4")
                seen = [m.text async for m in browser]  # type: ignore[attr-defined]
                assert seen == [str(i) for i in range(250)]
                assert conn.sync.destination_stats(queue)["messageCount"] == 250

                requests = session.create_queue("requests")
                server = await conn.create_session()
                listener = await server.create_consumer(requests)
                replies = await server.create_producer(None)

                async def serve(message: AsyncMessage) -> None:
                    reply = server.create_text_message(text_of(message).upper())
                    reply.correlation_id = message.message_id
                    assert message.reply_to is not None
                    await replies.send(reply, message.reply_to)

                listener.set_message_listener(serve)
                conn.start()
                async with AsyncRequestor(session, requests) as requestor:
                    answers = await asyncio.gather(*(
                        requestor.request(session.create_text_message(f"q{i}"), timeout=10)
                        for i in range(5)))
                    assert [text_of(a) for a in answers] == [f"Q{i}" for i in range(5)]
                    listener.set_message_listener(None)
                    with pytest.raises(TimeoutError):
                        await requestor.request(session.create_text_message("none"),
                                                timeout=0.1)
                temporary = await session.create_temporary_queue()
                temp_consumer = await session.create_consumer(temporary)
                await replies.send(session.create_text_message("tmp"), temporary)
                got = await temp_consumer.receive(timeout=10)
                assert got is not None and text_of(got) == "tmp"

    run(main)


def test_runs_on_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop")

    async def main() -> list[str]:
        with vm_factory() as factory:
            async with factory.create_connection() as conn:
                session, _, producer, consumer = await queue_ends(conn, "uv")
                for i in range(5):
                    await producer.send(session.create_text_message(str(i)))
                return [text_of(m) async for m in consumer.messages(timeout=0.2)]

    assert run(main, loop_factory=uvloop.new_event_loop) == ["0", "1", "2", "3", "4"]
