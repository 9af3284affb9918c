"""Memory pressure from one destination holds that destination's producers only, in the
default configuration (seed 003's per-destination memory limits): every destination has
a default share of the broker's ``memory-limit`` (10 %), the broker's limit acts only
when the shares together cannot hold, a persistent message for a queue that does not
exist yet is stored, pages come back in by bytes, one oversized message blocks no other
destination, and a held producer's error names the destination and the limit.

The messages here carry a declared ``size`` (what memory accounting charges) and a short
body, so megabytes of pending messages cost the test little."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from core_support import FakeClock, Recorder, drain_acking, msg, tmsg

from jmspy.broker_ref.config import ConfigError, parse_config
from jmspy.broker_ref.core import Broker, DestinationKind, ResourceLimitExceeded
from jmspy.broker_ref.core.api import AddressSettings
from jmspy.broker_ref.core.broker import DEFAULT_MEMORY_LIMIT
from jmspy.broker_ref.core.consumer import PAGE_OVERHEAD
from jmspy.broker_ref.core.queue_limits import page_limit_of
from jmspy.broker_ref.protocols.stomp.client import format_usage
from jmspy.broker_ref.store.sqlite_store import SqliteStore

Q = DestinationKind.QUEUE
T = DestinationKind.TOPIC
MB = 1024 * 1024
#: a destination's default share of the default 64 MB memory-limit
SHARE = -(-DEFAULT_MEMORY_LIMIT // 10)  # rounded up: ten shares make the whole limit


def big(dest: str, i: int, *, size: int = MB, topic: bool = False, **kw: Any) -> Any:
    """A non-persistent message that costs ``size`` bytes of RAM while pending."""
    kw.setdefault("persistent", False)
    make = tmsg if topic else msg
    return make(dest, str(i), size=size - PAGE_OVERHEAD, **kw)


def default_broker(tmp_path: Path, clock: FakeClock, **kw: Any) -> Broker:
    """The default configuration (64 MB, destination shares of 10 %)."""
    return Broker(clock=clock, spool_dir=tmp_path / "temp", **kw)


def send_until_held(conn: Any, make: Any, most: int = 1000) -> int:
    """Send ``make(i)`` with tickets until one is held; returns how many went through."""
    for i in range(most):
        if not conn.send(make(i), ticket=i):
            return i
    raise AssertionError(f"{most} sends and none was held")


def assert_served_one_by_one(b: Broker, dest: str, n: int, credit: int) -> None:
    """A queue whose consumer waits (with ``credit``): ``n`` 1 MB sends from another
    connection each go through and are delivered and acknowledged before the next."""
    rec = Recorder()
    cons = b.connect(rec)
    cons.create_consumer(1, Q, dest, credit=credit)
    producer = b.connect(Recorder())
    for i in range(n):
        assert producer.send(big(dest, i), ticket=i) is True
        assert drain_acking(cons, rec) == [str(i)]
        cons.grant_credit(1, 1)


def test_a_never_reading_topic_subscriber_holds_only_the_topics_producer(
        tmp_path: Path, clock: FakeClock) -> None:
    b = default_broker(tmp_path, clock)
    stuck = b.connect(Recorder())
    stuck.create_consumer(1, T, "prices", credit=1)  # takes one message, never acks
    topic_rec = Recorder()
    topic_producer = b.connect(topic_rec)
    went = send_until_held(topic_producer, lambda i: big("prices", i, topic=True))
    # the subscriber's backlog is bounded by the topic's share (one in flight besides)
    assert went == 1 + SHARE // MB + 1
    stats = b.stats("prices", T)
    assert stats.memory_limit == SHARE and SHARE <= stats.memory_usage <= SHARE + MB
    assert stats.blocked_producers == 1
    assert b.budget.used < DEFAULT_MEMORY_LIMIT // 5  # the broker is far from full

    # a queue whose consumer waits: 200 MB go through one after another, every send done
    assert_served_one_by_one(b, "work", 200, credit=10)
    # another topic, read by its subscriber
    reader_rec = Recorder()
    reader = b.connect(reader_rec)
    reader.create_consumer(1, T, "news", credit=100)
    news_producer = b.connect(Recorder())
    for i in range(50):
        assert news_producer.send(big("news", i, topic=True), ticket=i) is True
        assert drain_acking(reader, reader_rec) == [str(i)]
        reader.grant_credit(1, 1)
    # a queue nobody consumes yet takes its own share, then holds its own producer
    idle_producer = b.connect(Recorder())
    assert send_until_held(idle_producer, lambda i: big("idle", i)) == SHARE // MB + 1
    # and a first message to a brand-new queue still goes
    assert b.connect(Recorder()).send(big("fresh", 0), ticket="f") is True
    # all the while the topic's producer is still held, its send not stored
    assert topic_rec.done == [] and b.stats("prices", T).blocked_producers == 1
    assert b.stats("idle").blocked_producers == 1


def test_the_broker_limit_acts_only_once_the_shares_together_cannot_hold(
        tmp_path: Path, clock: FakeClock) -> None:
    b = default_broker(tmp_path, clock)
    per_queue = SHARE // MB + 1  # whole messages until each queue is at its share
    for n in range(9):  # nine full destinations: 90 % of the broker's limit
        assert send_until_held(b.connect(Recorder()), lambda i, n=n: big(f"full{n}", i)) \
            == per_queue
    tenth = b.connect(Recorder())
    assert tenth.send(big("ninth-and-more", 0), ticket=0) is True  # shares still hold
    assert send_until_held(tenth, lambda i: big("ninth-and-more", i + 1)) == per_queue - 1
    # ten destinations hold their whole shares: now the broker's limit holds new ones
    late_rec = Recorder()
    late = b.connect(late_rec)
    assert late.send(big("late", 0), ticket="late", timeout_ms=1000) is False
    clock.advance(1000)
    b.process_timers()
    [(ticket, error)] = late_rec.done
    text = str(error)
    assert ticket == "late" and isinstance(error, ResourceLimitExceeded)
    assert "queue 'late'" in text and "the broker's memory-limit of 64 MB" in text, text
    assert "queue 'full0'" in text  # names who holds the memory
    # one destination's consumer frees its share: the broker's limit lets sends through
    cons_rec = Recorder()
    cons = b.connect(cons_rec)
    cons.create_consumer(1, Q, "full0", credit=1000)
    drain_acking(cons, cons_rec)
    assert b.connect(Recorder()).send(big("late", 1), ticket="again") is True


def fill_every_share(b: Broker) -> None:
    """Ten destinations at their shares: the broker's memory-limit is reached."""
    for n in range(10):
        send_until_held(b.connect(Recorder()), lambda i, n=n: big(f"full{n}", i))
    assert b.connect(Recorder()).send(big("probe", 0), ticket=0) is False


def test_under_full_memory_a_first_persistent_send_to_a_new_queue_is_stored(
        tmp_path: Path, clock: FakeClock) -> None:
    store = SqliteStore(tmp_path / "m.sqlite")
    b = default_broker(tmp_path, clock, store=store)
    fill_every_share(b)
    prod = b.connect(Recorder())
    assert prod.send(msg("brand.new", "kept", persistent=True), ticket="p") is True
    assert [m.message.body for m in store.read_queue("brand.new")] == ["kept"]
    assert b.stats("brand.new").message_count == 1
    # and sends that cost no pending RAM go too: a topic nobody subscribes to, a queue
    # whose consumer is waiting
    assert prod.send(big("nobody.listens", 0, topic=True), ticket="t") is True
    assert_served_one_by_one(b, "served", 20, credit=5)
    # a non-persistent one for a queue nobody consumes waits: it would need RAM
    assert b.connect(Recorder()).send(big("brand.new", 1), ticket="np") is False


def test_after_a_restart_one_oversized_stored_message_blocks_no_other_destination(
        tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "m.sqlite"
    b = default_broker(tmp_path, clock, store=SqliteStore(path))
    prod = b.connect(Recorder())
    assert prod.send(msg("huge", "70MB", size=70 * MB), ticket=0) is True
    small = [f"small{i}" for i in range(5)]
    for i, body in enumerate(small):
        assert prod.send(msg("huge", body, size=1000), ticket=i + 1) is True
    b.close()

    b = default_broker(tmp_path, clock, store=SqliteStore(path))
    huge = b.stats("huge")
    # the oversized message came back alone: the page budget is in bytes, so the small
    # ones behind it stay on disk
    assert huge.message_count == 6 and huge.paged_count == 5
    assert b.budget.used > DEFAULT_MEMORY_LIMIT  # one message beyond the whole limit
    # what the broker's limit sees of it: its queue's share, and the stats line says so
    usage = b.usage()
    assert usage["memoryCounted"] == usage["destinationMemoryLimit"] < DEFAULT_MEMORY_LIMIT
    line = format_usage({k: str(v) for k, v in usage.items() if v is not None})
    assert "(10 %) counted against it, each destination up to its own limit" in line
    near = dict(usage, memoryUsed=usage["memoryCounted"] + 1000)  # a message past a share
    assert "counted against" not in format_usage({k: str(v) for k, v in near.items()
                                                  if v is not None})
    rec = Recorder()
    other = b.connect(rec)
    assert other.send(msg("empty", "hello", persistent=False), ticket="np") is True
    assert other.send(msg("empty2", "hello", persistent=True), ticket="p") is True
    assert other.send(big("empty3", 0), ticket="big") is True
    assert rec.done == []
    # its own queue's non-persistent producers are held: it is over its own limit
    held = b.connect(Recorder())
    assert held.send(big("huge", 9), ticket="h") is False
    # a consumer gets the oversized one, then the rest, in order
    cons_rec = Recorder()
    cons = b.connect(cons_rec)
    cons.create_consumer(1, Q, "huge", credit=1)
    got: list[str] = []
    for _ in range(10):
        batch = cons_rec.take()
        if not batch:
            break
        got += [d.message.body for d in batch]
        cons.ack([d.delivery_tag for d in batch])
        cons.grant_credit(1, len(batch))
    # persistent ones in their order; the non-persistent one that waited joins them (JMS
    # orders messages within a delivery mode)
    assert got[0] == "70MB" and sorted(got) == sorted(["70MB", "9", *small])
    assert [x for x in got if x.startswith("small")] == small


def test_pages_come_back_in_bytes_not_messages(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "m.sqlite"
    b = default_broker(tmp_path, clock, store=SqliteStore(path))
    prod = b.connect(Recorder())
    for i in range(100):  # 100 MB of persistent messages nobody consumes
        assert prod.send(msg("deep", str(i), size=MB - PAGE_OVERHEAD), ticket=i) is True
    page_limit = page_limit_of(SHARE)
    # the queue pages out past 70 % of its own share, not of the broker's limit
    assert b.stats("deep").memory_usage <= page_limit
    b.close()
    b = default_broker(tmp_path, clock, store=SqliteStore(path))
    stats = b.stats("deep")
    assert stats.message_count == 100
    assert 0 < stats.memory_usage <= page_limit + MB  # a few, not PAGE_BATCH of them
    rec = Recorder()
    cons = b.connect(rec)
    cons.create_consumer(1, Q, "deep", credit=10)
    got: list[str] = []
    while batch := rec.take():
        got += [d.message.body for d in batch]
        cons.ack([d.delivery_tag for d in batch])
        cons.grant_credit(1, len(batch))
        assert b.stats("deep").memory_usage <= page_limit + MB
    assert got == [str(i) for i in range(100)]


def test_a_non_reading_subscriber_without_flow_control_spools_past_its_page_limit(
        tmp_path: Path, clock: FakeClock) -> None:
    b = default_broker(tmp_path, clock,
                       settings={"feed": AddressSettings(producer_flow_control=False)})
    b.connect(Recorder()).create_consumer(1, T, "feed", credit=1)
    prod = b.connect(Recorder())
    for i in range(100):  # 100 MB: past the topic's share, never held
        assert prod.send(big("feed", i, topic=True), ticket=i) is True
    stats = b.stats("feed", T)
    assert stats.memory_usage <= page_limit_of(SHARE) and stats.paged_count > 80
    assert b.spool.written == stats.paged_count


def held_error(b: Broker, clock: FakeClock, dest: str) -> str:
    """Fill ``dest`` to its limit on one connection, then a send with a timeout: the
    error it fails with."""
    rec = Recorder()
    conn = b.connect(rec)
    send_until_held(b.connect(Recorder()), lambda i: big(dest, i))
    assert conn.send(big(dest, 99), ticket="t", timeout_ms=250) is False
    clock.advance(250)
    b.process_timers()
    [(ticket, error)] = rec.done
    assert ticket == "t" and isinstance(error, ResourceLimitExceeded)
    return str(error)


def test_a_held_producers_error_names_the_destination_and_its_default_share(
        tmp_path: Path, clock: FakeClock) -> None:
    text = held_error(default_broker(tmp_path, clock), clock, "slow")
    assert "queue 'slow' is over its memory limit of 6.4 MB" in text, text
    assert "destination-memory-percent = 10 %" in text and "memory-limit of 64 MB" in text
    assert "waited 250 ms" in text and "consume from queue 'slow'" in text


def test_a_held_producers_error_names_a_limit_from_address_settings(
        tmp_path: Path, clock: FakeClock) -> None:
    b = default_broker(tmp_path, clock,
                       settings={"orders.#": AddressSettings(memory_limit=3 * MB)})
    text = held_error(b, clock, "orders.eu")
    assert "queue 'orders.eu' is over its memory limit of 3 MB" in text, text
    assert "memory-limit in its [address-settings]" in text


def test_send_fail_if_no_space_names_the_destination_that_is_full(
        tmp_path: Path, clock: FakeClock) -> None:
    b = default_broker(tmp_path, clock, send_fail_if_no_space=True)
    prod = b.connect(Recorder())
    with pytest.raises(ResourceLimitExceeded) as err:
        for i in range(100):
            prod.send(big("slow", i), ticket=i)
    text = str(err.value)
    assert "queue 'slow' is over its memory limit of 6.4 MB" in text, text
    assert "send-fail-if-no-space = true" in text


def test_a_send_waiting_behind_its_connections_held_send_says_which_holds_it(
        tmp_path: Path, clock: FakeClock) -> None:
    b = default_broker(tmp_path, clock)
    rec = Recorder()
    conn = b.connect(rec)
    went = send_until_held(conn, lambda i: big("slow", i))
    assert conn.send(big("elsewhere", 0), ticket="e", timeout_ms=100) is False
    clock.advance(100)
    b.process_timers()
    [(ticket, error)] = rec.done
    text = str(error)
    assert ticket == "e" and isinstance(error, ResourceLimitExceeded)
    # the send was to 'elsewhere'; what holds it is 'slow', and the error says both
    assert "the send to queue 'elsewhere' waits behind an earlier send" in text, text
    assert "queue 'slow' is over its memory limit" in text
    assert b.stats("slow").blocked_producers == 1 and went == SHARE // MB + 1


def test_destination_memory_percent_is_checked(tmp_path: Path, clock: FakeClock) -> None:
    for bad in (0, 101, 2.5, "10"):
        with pytest.raises(ValueError, match="destination_memory_percent must be an int"):
            default_broker(tmp_path, clock, destination_memory_percent=bad)
    b = default_broker(tmp_path, clock, destination_memory_percent=50)
    assert b.destination_memory_limit == DEFAULT_MEMORY_LIMIT // 2  # 64 MB is even
    assert b.connect(Recorder()).send(big("new.queue", 0), ticket=0) is True
    assert b.stats("new.queue").memory_limit == DEFAULT_MEMORY_LIMIT // 2  # 64 MB is even


def test_destination_memory_percent_is_read_from_system_usage() -> None:
    assert parse_config({}, "x").broker_kwargs()["destination_memory_percent"] == 10
    cfg = parse_config({"system-usage": {"destination-memory-percent": 25,
                                         "memory-limit": "8 MB"}}, "broker.toml")
    b = Broker(**cfg.broker_kwargs())
    assert b.destination_memory_limit == 2 * MB
    b.close()
    for bad in (0, 101, "ten"):
        with pytest.raises(ConfigError) as err:
            parse_config({"system-usage": {"destination-memory-percent": bad}}, "broker.toml")
        assert "broker.toml: [system-usage] destination-memory-percent" in str(err.value)
