"""The ``jmspy`` Spark source against ``jmspy broker``: every message exactly once through a
streaming query, acknowledged only after Spark commits (the last batch too, by the flush
tick), redelivered (marked) when the query stops between a batch and its commit;
``availableNow`` with ``maxMessagesPerTrigger``; browse consumes nothing; bad options fail
the query at start with jmspy's words."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import BACKLOG_CONFIG, Broker


class Collected:
    """A foreachBatch sink that keeps (batch, text, redelivered) in the driver."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, bool]] = []
        self.batches: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = df.select("text", "redelivered").collect()
        with self.lock:
            self.batches.append(len(rows))
            self.rows.extend((batch_id, r.text, r.redelivered) for r in rows)

    def texts(self) -> list[str]:
        return [t for _, t, _ in self.rows]


def stream(spark: Any, broker: Broker, queue: str, **options: str) -> Any:
    reader = (spark.readStream.format("jmspy").option("url", broker.url)
              .option("destination", f"queue://{queue}"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_50000_messages_stream_through_exactly_once_and_leave_the_queue_empty(
        spark: Any, any_broker: Broker, tmp_path: Path) -> None:
    broker = any_broker
    n = 50_000
    broker.fill("orders", n)
    sink = Collected()
    query = (stream(spark, broker, "orders").writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert sorted(map(int, sink.texts())) == list(range(n))  # each once
    stats = broker.settled("orders")
    assert stats["messageCount"] == 0 and stats["deliveringCount"] == 0  # all acknowledged


def test_available_now_in_3000_message_triggers_acknowledges_all_10000(
        spark: Any, broker: Broker, tmp_path: Path) -> None:
    broker.fill("batches", 10_000)
    sink = Collected()
    query = (stream(spark, broker, "batches", maxMessagesPerTrigger="3000")
             .writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    data = [b for b in sink.batches if b]
    assert data == [3000, 3000, 3000, 1000]  # the admission limit, then the rest
    assert broker.stats("batches")["messageCount"] == 0  # the last batch too (flush tick)


def test_a_query_stopped_before_its_commit_gets_that_batch_again_marked_redelivered(
        spark: Any, broker: Broker, tmp_path: Path) -> None:
    broker.fill("again", 5000)
    ckpt = str(tmp_path / "ckpt")
    sink = Collected()
    first_done = threading.Event()

    def first_batch_then_stop(df: Any, batch_id: int) -> None:
        sink(df, batch_id)
        first_done.set()

    query = (stream(spark, broker, "again", maxMessagesPerTrigger="2000")
             .writeStream.foreachBatch(first_batch_then_stop)
             .option("checkpointLocation", ckpt).trigger(processingTime="2 seconds").start())
    first_done.wait(120)
    query.stop()  # after batch 0's addBatch, before the source heard commit(batch 0)
    first = list(sink.rows)
    assert first and {b for b, _, _ in first} == {0}
    again = Collected()
    query = (stream(spark, broker, "again", maxMessagesPerTrigger="2000")
             .writeStream.foreachBatch(again).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    seen = [t for _, t, _ in first] + again.texts()
    assert sorted(set(map(int, seen))) == list(range(5000))  # none missing
    duplicates = {t for t in again.texts() if t in {t for _, t, _ in first}}
    first_batch = {t for _, t, _ in first}
    assert duplicates <= first_batch  # duplicates only of the uncommitted batch...
    assert all(r for _, t, r in again.rows if t in duplicates)  # ...each marked redelivered
    assert broker.stats("again")["messageCount"] == 0


def test_browse_returns_the_queue_and_consumes_nothing(spark: Any, broker: Broker) -> None:
    broker.fill("look", 300, prefix="m")
    df = (spark.read.format("jmspy").option("url", broker.url)
          .option("destination", "queue://look").load())
    rows = df.select("text", "destination", "redelivered", "delivery_count").collect()
    assert sorted(r.text for r in rows) == sorted(f"m{i}" for i in range(300))
    assert {r.destination for r in rows} == {"queue://look"}
    assert broker.stats("look")["messageCount"] == 300


@pytest.mark.parametrize(("options", "says"), [
    ({"url": "stomp://127.0.0.1:1", "destination": "queue://q", "colour": "red"},
     "unknown option 'colour'"),
    ({"url": "nosuch://x", "destination": "queue://q"}, "nosuch"),
    ({"url": "stomp://127.0.0.1:1", "destination": "orders"}, "must say its kind"),
    ({"destination": "queue://q"}, "option 'url' is missing"),
])
def test_bad_options_fail_at_start_with_jmspys_message(
        spark: Any, options: dict[str, str], says: str) -> None:
    reader = spark.readStream.format("jmspy")
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=says):
        reader.load().writeStream.format("console").start().awaitTermination(60)


def test_wrong_credentials_fail_the_query_with_the_brokers_refusal(
        spark: Any, tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(BACKLOG_CONFIG + '[security]\nenabled = true\n[security.users.alice]\n'
                      'password = "right-Pa55"\nroles = ["a"]\n')
    b = Broker(tmp_path, "--in-memory", "--config", str(config))
    try:
        query = (spark.readStream.format("jmspy").option("url", b.url)
                 .option("destination", "queue://q").option("user", "alice")
                 .option("password", "wrong").load()
                 .writeStream.format("console").start())
        with pytest.raises(Exception, match="authentication failed for user 'alice'"):
            query.awaitTermination(60)
    finally:
        b.stop()


def test_a_sigkilled_driver_restarted_from_its_checkpoint_misses_nothing(
        broker: Broker, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    broker.fill("killed", 5000)
    out = tmp_path / "out"
    out.mkdir()
    ckpt = str(tmp_path / "ckpt")
    child = str(Path(__file__).with_name("driver_child.py"))

    def run(mode: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, child, broker.url, "killed", ckpt, str(out),
                                 mode], start_new_session=True)

    first = run("forever")
    deadline = time.monotonic() + 180
    while len([f for f in os.listdir(out) if not f.startswith(".")]) < 2:
        assert time.monotonic() < deadline and first.poll() is None, "no batch came"
        time.sleep(0.1)  # waits for the child's first two micro-batches
    os.killpg(first.pid, signal.SIGKILL)  # the driver and its JVM, mid-stream
    first.wait(30)
    killed_files = sorted(os.listdir(out))
    second = run("available-now")
    assert second.wait(300) == 0
    lines = []
    for name in sorted(os.listdir(out)):
        run_pid, _ = name.split("-")
        for line in (out / name).read_text().splitlines():
            text, redelivered = line.split()
            lines.append((int(run_pid), text, redelivered == "1"))
    texts = [t for _, t, _ in lines]
    assert sorted(set(map(int, texts))) == list(range(5000))  # 0 missing
    before = {t for p, t, _ in lines if p == first.pid}
    for _, text, redelivered in (x for x in lines if x[0] == second.pid):
        if text in before:
            assert redelivered, f"{text} came twice without being marked redelivered"
    assert killed_files and broker.stats("killed")["messageCount"] == 0


def test_a_durable_topic_subscription_keeps_what_is_published_between_runs(
        spark: Any, broker: Broker, tmp_path: Path) -> None:
    from jmspy import ConnectionFactory, Topic

    def run_once(sink: Collected) -> None:
        (spark.readStream.format("jmspy").option("url", broker.url)
         .option("destination", "topic://prices").option("subscriptionName", "spark")
         .option("clientID", "pipeline").load()
         .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start().awaitTermination())

    first = Collected()
    run_once(first)  # creates the subscription; nothing published yet
    assert first.texts() == []
    with ConnectionFactory(broker.url).create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(Topic("prices"))
        for i in range(100):
            producer.send(session.create_text_message(str(i)))
    second = Collected()
    run_once(second)  # kept by the durable subscription while no query ran
    assert sorted(map(int, second.texts())) == list(range(100))


def test_a_restarted_reader_replays_its_uncommitted_batch_with_the_oldest_messages(
        broker: Broker) -> None:
    """Spark replays a batch that was planned but not committed (its offsets are in the
    checkpoint) by asking the new reader for that range first: it must be filled with the
    messages the broker delivers first (the redelivered ones), numbered from the range's
    start, and a commit acknowledges exactly those."""
    from jmspy.spark.options import parse_options
    from jmspy.spark.rows import SCHEMA
    from jmspy.spark.stream import StreamReader

    assert SCHEMA.startswith("message_id")
    broker.fill("replay", 2000)
    reader = StreamReader(parse_options({"url": broker.url, "destination": "queue://replay"}))
    try:
        [part] = reader.partitions({"seq": 1000, "tick": 0}, {"seq": 1500, "tick": 0})
        texts = [row[9] for row in reader.read(part)]
        assert texts == [str(i) for i in range(500)]  # the oldest, not the 1001st onwards
        reader.commit({"seq": 1500, "tick": 0})
        nxt = reader.latestOffset({"seq": 1500, "tick": 0}, _max_rows(300))
        assert nxt == {"seq": 1800, "tick": 0}
        [part] = reader.partitions({"seq": 1500, "tick": 0}, nxt)
        assert [row[9] for row in reader.read(part)] == [str(i) for i in range(500, 800)]
    finally:
        reader.stop()
    assert broker.stats("replay")["messageCount"] == 1500  # only the committed 500 went


def _max_rows(n: int) -> Any:
    from pyspark.sql.streaming.datasource import ReadMaxRows

    return ReadMaxRows(n)


def test_a_broker_restarted_mid_query_loses_nothing_and_the_query_keeps_running(
        spark: Any, stored_broker: Broker, tmp_path: Path) -> None:
    """Reconnect is on by default in the reader: the broker SIGKILLed and started again
    (same port and store) in the middle of a query; the query rides through, every message
    comes, and those that come twice (unacknowledged at the kill) are marked redelivered."""
    from polling import wait_until

    broker = stored_broker
    broker.fill("survive", 3000, persistent=True)
    sink = Collected()
    query = (stream(spark, broker, "survive", maxMessagesPerTrigger="300",
                    imqReconnectInterval="200")
             .writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        assert wait_until(lambda: len(sink.rows) >= 600, 180)
        broker.restart(kill=True)
        every = {str(i) for i in range(3000)}
        wait_until(lambda: set(sink.texts()) >= every or not query.isActive, 180)
        assert query.isActive and query.exception() is None  # it rode through
        assert set(sink.texts()) >= every
        assert wait_until(lambda: broker.stats("survive")["messageCount"] == 0, 60)
    finally:
        query.stop()
    with sink.lock:
        texts = sink.texts()
        seen: set[str] = set()
        for _, text, redelivered in sink.rows:
            assert text not in seen or redelivered, f"{text} came twice, not marked"
            seen.add(text)
    assert sorted(set(map(int, texts))) == list(range(3000))


def test_available_now_stops_at_the_depth_the_queue_had_when_the_query_started(
        spark: Any, broker: Broker, tmp_path: Path) -> None:
    """A producer keeps sending while an availableNow query runs: the query reads the
    5,000 the queue held at its start and stops; the next run reads the rest."""
    from jmspy import ConnectionFactory, DeliveryMode, Queue

    broker.fill("fixed", 5000)
    ended = threading.Event()
    sent_late: list[int] = []
    started = threading.Event()

    def produce() -> None:
        with ConnectionFactory(broker.url).create_connection() as conn:
            session = conn.create_session()
            producer = session.create_producer(Queue("fixed"))
            while not ended.is_set() and len(sent_late) < 20_000:
                producer.send(session.create_text_message(f"late-{len(sent_late)}"),
                              delivery_mode=DeliveryMode.NON_PERSISTENT)
                sent_late.append(1)
                started.set()

    def run(sink: Any) -> None:
        (stream(spark, broker, "fixed", maxMessagesPerTrigger="1000")
         .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start().awaitTermination())

    first = Collected()

    def first_sink(df: Any, batch_id: int) -> None:
        first(df, batch_id)
        go.set()  # the query started (and took the depth): the producer starts now
        assert started.wait(60)  # ...and has sent before the query reads on

    go = threading.Event()
    producer = threading.Thread(target=lambda: go.wait(300) and produce())
    producer.start()
    try:
        run(first_sink)
    finally:
        go.set()
        ended.set()
        producer.join(60)
    assert sorted(map(int, first.texts())) == list(range(5000))  # what was there, once
    assert sent_late  # the producer did add while it ran
    second = Collected()
    run(second)
    assert sorted(second.texts()) == sorted(f"late-{i}" for i in range(len(sent_late)))
    assert broker.settled("fixed")["messageCount"] == 0


def test_reply_to_expiration_and_delivery_mode_are_columns(spark: Any, broker: Broker) -> None:
    from jmspy import ConnectionFactory, DeliveryMode, Queue

    with ConnectionFactory(broker.url).create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(Queue("headers"))
        m = session.create_text_message("asks")
        m.reply_to = Queue("answers")
        producer.send(m, delivery_mode=DeliveryMode.NON_PERSISTENT, time_to_live=3600.0)
        producer.send(session.create_text_message("plain"))
    rows = {r.text: r for r in (spark.read.format("jmspy").option("url", broker.url)
                                .option("destination", "queue://headers").load()
                                .select("text", "reply_to", "expiration", "delivery_mode",
                                        "timestamp").collect())}
    asks, plain = rows["asks"], rows["plain"]
    assert (asks.reply_to, asks.delivery_mode) == ("queue://answers", "NON_PERSISTENT")
    assert (asks.expiration - asks.timestamp).total_seconds() == 3600  # its time to live
    assert (plain.reply_to, plain.expiration, plain.delivery_mode) == (
        None, None, "PERSISTENT")
