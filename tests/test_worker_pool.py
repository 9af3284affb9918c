"""MDB-like worker pools (seed 004) over ``vm://``: the seed's numbers (pool 32, flow
limit 16 -> 16 at once, and the warning that says so), ``prefetch="pool"``, the cluster
dilemma measured, redelivery after a listener's exception then the dead message queue,
and a ``stop()`` that loses nothing."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jmspy import ConnectionFactory, Queue
from jmspy.errors import InvalidConfigurationException
from jmspy.pool import DEAD_LETTER_REASON, WorkerPool


@pytest.fixture
def broker(vm_broker_factory: Callable[..., Any]) -> tuple[Any, str]:
    host, factory = vm_broker_factory()
    return host, factory.url


def fill(url: str, queue: str, n: int) -> None:
    with ConnectionFactory(url).create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(Queue(queue))
        for i in range(n):
            producer.send(session.create_text_message(str(i)))


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)  # waits for the pool's worker threads


class Sleeper:
    """A listener class (a fresh instance per worker) that sleeps, and records."""

    seen: list[str] = []
    lock = threading.Lock()
    delay = 0.05

    def on_message(self, message: Any) -> None:
        time.sleep(self.delay)
        with self.lock:
            self.seen.append(message.text)


@pytest.fixture
def sleeper() -> Iterator[type[Sleeper]]:
    Sleeper.seen = []
    Sleeper.delay = 0.05
    yield Sleeper


@pytest.mark.parametrize(("flow_limit", "prefetch", "peak"), [
    (16, None, 16), (1000, None, 32), (16, "pool", 32)])
def test_the_seeds_numbers_pool_32_with_a_flow_limit_of_16_runs_16_at_once(
        broker: tuple[Any, str], sleeper: type[Sleeper], caplog: pytest.LogCaptureFixture,
        flow_limit: int, prefetch: str | None, peak: int) -> None:
    host, url = broker
    fill(url, "orders", 500)
    caplog.set_level(logging.WARNING, "jmspy.client.pool")
    most_delivering = [0]

    class Watching(Sleeper):
        def on_message(self, message: Any) -> None:
            delivering = host.stats("orders")["deliveringCount"]
            with self.lock:
                most_delivering[0] = max(most_delivering[0], delivering)
            super().on_message(message)

    factory = ConnectionFactory(url, imqConsumerFlowLimit=flow_limit)
    with WorkerPool(factory, "orders", Watching, max_pool_size=32, prefetch=prefetch) as pool:
        wait_for(lambda: len(Sleeper.seen) == 500, "500 messages")
        stats = pool.stats()
    assert stats["peak_concurrency"] == peak and stats["processed"] == 500
    assert sorted(map(int, Sleeper.seen)) == list(range(500))
    assert host.stats("orders")["messageCount"] == 0
    warned = [r.getMessage() for r in caplog.records if "reducing the pool" in r.getMessage()]
    if peak < 32:  # the seed's pitfall, in its words, naming both numbers
        assert len(warned) == 1 and "16" in warned[0] and "maxPoolSize=32" in warned[0]
    else:
        assert not warned
    if prefetch == "pool":  # each freed instance refilled at once (threshold 100 %)
        assert stats["flow"]["limit"] == 32 and most_delivering[0] <= 32
        assert stats["flow"]["threshold"] == 100


def test_the_cluster_dilemma_two_pools_of_8_and_a_burst_of_40(
        broker: tuple[Any, str], sleeper: type[Sleeper]) -> None:
    """The seed's cluster case: two application servers (two pools, two connections, one
    consumer each) on one queue; a burst of 40 messages of 100 ms is on the queue when
    they come up, one a moment after the other. Batches go first come, first served."""
    _, url = broker
    sleeper.delay = 0.1
    timings: dict[int, float] = {}
    for limit in (1000, 8, 2):
        Sleeper.seen = []
        fill(url, f"burst{limit}", 40)
        factory = ConnectionFactory(url, imqConsumerFlowLimit=limit)
        started = time.monotonic()
        with (WorkerPool(factory, f"burst{limit}", Sleeper, max_pool_size=8) as first,
              WorkerPool(factory, f"burst{limit}", Sleeper, max_pool_size=8) as second):
            wait_for(lambda: len(Sleeper.seen) == 40, "the burst")
            timings[limit] = time.monotonic() - started
            a, b = first.stats(), second.stats()
        print(f"flow limit {limit:>4}: {timings[limit]:.2f} s; first pool processed "
              f"{a['processed']} (peak {a['peak_concurrency']}), second {b['processed']} "
              f"(peak {b['peak_concurrency']})")
        if limit == 1000:  # one pool took the whole burst; the other idled
            assert (a["processed"], b["processed"]) == (40, 0)
            assert a["peak_concurrency"] == 8
        else:  # both worked, each at most `limit` at once
            assert a["processed"] > 0 and b["processed"] > 0
            assert a["processed"] + b["processed"] == 40
            assert a["peak_concurrency"] == b["peak_concurrency"] == min(8, limit)


class Flaky:
    """Raises on the first ``fails`` deliveries of each message, then succeeds."""

    fails = 2
    calls: list[tuple[str, bool, int, float]] = []

    def on_message(self, message: Any) -> None:
        Flaky.calls.append((message.text, message.redelivered, message.delivery_count,
                            time.monotonic()))
        if sum(1 for c in Flaky.calls if c[0] == message.text) <= Flaky.fails:
            raise RuntimeError(f"boom on {message.text}")


def test_a_listener_that_raises_twice_gets_the_message_again_after_the_interval(
        broker: tuple[Any, str]) -> None:
    host, url = broker
    Flaky.calls, Flaky.fails = [], 2
    fill(url, "flaky", 1)
    with WorkerPool(ConnectionFactory(url), "flaky", Flaky, max_pool_size=4,
                    endpointExceptionRedeliveryInterval=200) as pool:
        wait_for(lambda: pool.stats()["processed"] == 1, "the third delivery to succeed")
        stats = pool.stats()
    assert [(t, r, n) for t, r, n, _ in Flaky.calls] == [
        ("0", False, 1), ("0", True, 2), ("0", True, 3)]
    gaps = [b[3] - a[3] for a, b in zip(Flaky.calls, Flaky.calls[1:], strict=False)]
    assert all(g >= 0.19 for g in gaps)  # not before the interval
    assert (stats["failed"], stats["redelivered"], stats["dead_lettered"]) == (2, 2, 0)
    assert host.stats("flaky")["messageCount"] == 0


def test_a_listener_that_always_raises_sends_the_message_to_the_dead_message_queue(
        broker: tuple[Any, str]) -> None:
    host, url = broker
    Flaky.calls, Flaky.fails = [], 10**6
    fill(url, "poison", 1)
    with WorkerPool(ConnectionFactory(url), "poison", Flaky, max_pool_size=4,
                    endpoint_exception_redelivery_attempts=3,
                    endpoint_exception_redelivery_interval=10) as pool:
        wait_for(lambda: pool.stats()["dead_lettered"] == 1, "the dead-lettering")
    assert len(Flaky.calls) == 4  # the first delivery and 3 redeliveries
    assert host.stats("poison")["messageCount"] == 0
    with ConnectionFactory(url).create_connection() as conn:
        consumer = conn.create_session().create_consumer(Queue("DLQ"))
        conn.start()
        dead = consumer.receive(5.0)
    assert dead is not None and dead.text == "0"
    reason = dead.get_property(DEAD_LETTER_REASON)
    assert "RuntimeError: boom on 0" in reason and "4 deliveries" in reason


def test_stop_with_20_in_flight_loses_nothing_and_repeats_only_redelivered_messages(
        broker: tuple[Any, str]) -> None:
    host, url = broker
    fill(url, "stopping", 60)
    release = threading.Event()
    seen: list[tuple[str, bool]] = []

    def blocking(message: Any) -> None:
        release.wait(30)
        seen.append((message.text, message.redelivered))

    pool = WorkerPool(ConnectionFactory(url, imqConsumerFlowLimit=40), "stopping", blocking,
                      max_pool_size=20, steady_pool_size=20).start()
    wait_for(lambda: pool.stats()["busy"] == 20, "20 messages in flight")
    stopper = threading.Thread(target=pool.stop, args=(30.0,))
    stopper.start()
    time.sleep(0.2)  # lets stop() stop the dispatcher while the 20 are still running
    release.set()
    stopper.join(30)
    assert pool.stats()["processed"] == 20
    done = [t for t, _ in seen]
    assert len(done) == 20 and len(set(done)) == 20
    # the rest went back to the broker: a new consumer gets all of them, none of the 20
    rest: list[tuple[str, bool]] = []
    with ConnectionFactory(url).create_connection() as conn:
        consumer = conn.create_session().create_consumer(Queue("stopping"))
        conn.start()
        while (m := consumer.receive(1.0)) is not None:
            rest.append((m.text, m.redelivered))
    assert sorted(int(t) for t in done + [t for t, _ in rest]) == list(range(60))
    assert host.stats("stopping")["messageCount"] == 0


def test_stop_past_its_timeout_returns_unfinished_messages_marked_redelivered(
        broker: tuple[Any, str]) -> None:
    _, url = broker
    fill(url, "slow", 4)
    release = threading.Event()
    pool = WorkerPool(ConnectionFactory(url), "slow", lambda m: release.wait(30),
                      max_pool_size=4, steady_pool_size=4).start()
    wait_for(lambda: pool.stats()["busy"] == 4, "4 messages in flight")
    pool.stop(timeout=0.2)
    release.set()
    with ConnectionFactory(url).create_connection() as conn:
        consumer = conn.create_session().create_consumer(Queue("slow"))
        conn.start()
        again = [consumer.receive(5.0) for _ in range(4)]
    assert all(m is not None and m.redelivered for m in again)


def test_activation_properties_take_both_spellings_and_refuse_unknown_ones(
        broker: tuple[Any, str]) -> None:
    _, url = broker
    factory = ConnectionFactory(url)
    pool = WorkerPool(factory, "x", print, maxPoolSize=4, messageSelector="a > 1",
                      endpointExceptionRedeliveryAttempts=1, steady_pool_size=2)
    spec = pool.spec
    assert (spec.max_pool_size, spec.message_selector, spec.steady_pool_size) == (4, "a > 1", 2)
    assert spec.endpoint_exception_redelivery_attempts == 1
    assert WorkerPool(factory, "x", print).spec.max_pool_size == 32  # Glassfish's default
    with pytest.raises(InvalidConfigurationException, match="unknown activation property"):
        WorkerPool(factory, "x", print, maxPoolSise=4)
    with pytest.raises(InvalidConfigurationException, match="destinationType"):
        WorkerPool(factory, "x", print, destinationType="jakarta.jms.Stream")
    with pytest.raises(InvalidConfigurationException, match="Durable"):
        WorkerPool(factory, "x", print, subscriptionDurability="Durable")
    with pytest.raises(InvalidConfigurationException, match="module:attribute"):
        WorkerPool(factory, "x", "no_colon_here")
    with pytest.raises(InvalidConfigurationException, match="prefetch"):
        WorkerPool(factory, "x", print, prefetch="lots")


def test_process_workers_survive_a_sigkill_mid_message_and_the_message_comes_again(
        broker: tuple[Any, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    host, url = broker
    log = tmp_path / "processed.log"
    monkeypatch.setenv("POOL_LOG", str(log))
    monkeypatch.setenv("POOL_DIE", "7")
    fill(url, "crunch", 20)
    caplog.set_level(logging.WARNING, "jmspy.client.pool")
    with WorkerPool(ConnectionFactory(url), "crunch", "pool_listeners:record",
                    processes=True, max_pool_size=2, steady_pool_size=2,
                    endpointExceptionRedeliveryInterval=10) as pool:
        wait_for(lambda: pool.stats()["processed"] == 20, "20 messages", timeout=120)
        stats = pool.stats()
    lines = [line.split() for line in log.read_text().splitlines()]
    by_text = {text: (int(pid), redelivered == "1") for text, pid, redelivered in lines}
    assert sorted(map(int, by_text)) == list(range(20)) and len(lines) == 20
    dead_pid = int((tmp_path / "processed.log.died").read_text())
    assert by_text["7"][1] and by_text["7"][0] != dead_pid  # again, redelivered, elsewhere
    assert not any(redelivered for text, (_, redelivered) in by_text.items() if text != "7")
    assert stats["replaced"] == 1 and stats["workers"] == 2  # back to full size
    assert any(f"worker process {dead_pid} died" in r.getMessage() for r in caplog.records)
    assert host.stats("crunch")["messageCount"] == 0


def test_a_process_listener_that_raises_is_dead_lettered_with_its_exception(
        broker: tuple[Any, str]) -> None:
    _, url = broker
    fill(url, "bad", 1)
    with WorkerPool(ConnectionFactory(url), "bad", "pool_listeners:Failing", processes=True,
                    max_pool_size=1, endpoint_exception_redelivery_attempts=1,
                    endpoint_exception_redelivery_interval=10) as pool:
        wait_for(lambda: pool.stats()["dead_lettered"] == 1, "the dead-lettering", 120)
    with ConnectionFactory(url).create_connection() as conn:
        consumer = conn.create_session().create_consumer(Queue("DLQ"))
        conn.start()
        dead = consumer.receive(5.0)
    assert dead is not None and "ValueError: cannot handle 0" in dead.get_property(
        DEAD_LETTER_REASON)
