"""Reading on the executors (``numPartitions``) under jmspy broker's reading leases: each
micro-batch is read by its tasks over their own connections, the messages stay with the
broker until the driver's commit settles the batch, a task that fails mid-read or a query
stopped before its commit loses nothing (what comes again is marked redelivered), and
``availableNow`` stops at the depth the queue had."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Broker
from test_spark_source import Collected, stream


def test_executors_read_every_message_once_and_the_commit_consumes_them(
        spark: Any, broker: Broker, tmp_path: Path) -> None:
    n = 20_000
    broker.fill("leased", n)
    sink = Collected()
    query = (stream(spark, broker, "leased", numPartitions="4",
                    maxMessagesPerTrigger="8000")
             .writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert sorted(map(int, sink.texts())) == list(range(n))  # each once
    assert [b for b in sink.batches if b] == [8000, 8000, 4000]
    stats = broker.settled("leased")
    assert stats["messageCount"] == 0 and stats["deliveringCount"] == 0


def test_a_task_failing_mid_read_is_retried_and_nothing_is_lost_or_unmarked_twice(
        spark: Any, broker: Broker, tmp_path: Path) -> None:
    """Each batch's first attempt of partition 1 fails after its rows were read (and
    lent): the retry releases them, reads again, and only the retry's rows count."""
    from pyspark import TaskContext
    from pyspark.sql.functions import col, udf

    n = 6_000
    broker.fill("retried", n)

    def fail_first_attempt(text: str) -> str:
        context = TaskContext.get()
        if context is not None and context.partitionId() == 1 and context.attemptNumber() == 0:
            raise RuntimeError("injected: the executor died mid-partition")
        return text

    failing = udf(fail_first_attempt, "string", useArrow=False)
    sink = Collected()
    df = stream(spark, broker, "retried", numPartitions="3", maxMessagesPerTrigger="3000")
    query = (df.withColumn("text", failing(col("text")))
             .writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    texts = sink.texts()
    assert sorted(map(int, texts)) == list(range(n))  # none lost, none twice
    assert any(redelivered for _, _, redelivered in sink.rows)  # the retried share, marked
    stats = broker.settled("retried")
    assert stats["messageCount"] == 0 and stats["deliveringCount"] == 0


@pytest.mark.parametrize("sink_reads", [True, False], ids=["read-then-fail", "fail-unread"])
def test_a_query_stopped_before_its_commit_is_replayed_from_the_same_leases(
        spark: Any, broker: Broker, tmp_path: Path, sink_reads: bool) -> None:
    """The first run's sink fails its second batch, after reading it or before: that batch
    is planned but never committed. The restart from the checkpoint replays it under the
    same tokens, each task releasing before it reads, so every message arrives once in the
    sink; what the first run's tasks read comes again marked redelivered, and what they
    never read is not marked (nothing the readers prefetched beyond their shares is)."""
    n = 4_000
    queue = f"replayed-{sink_reads}"
    broker.fill(queue, n)
    ckpt = str(tmp_path / "ckpt")
    first = Collected()

    def failing(df: Any, batch_id: int) -> None:
        if batch_id == 1:
            if sink_reads:
                assert len(df.collect()) == 1000  # the tasks read and lend the batch
            raise RuntimeError("injected: the sink fails batch 1")
        first(df, batch_id)

    query = (stream(spark, broker, queue, numPartitions="2",
                    maxMessagesPerTrigger="1000")
             .writeStream.foreachBatch(failing).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    except Exception as exc:  # the query fails with the injected error
        assert "injected" in str(exc)
    second = Collected()
    query = (stream(spark, broker, queue, numPartitions="2",
                    maxMessagesPerTrigger="1000")
             .writeStream.foreachBatch(second).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    got = first.texts() + second.texts()
    assert sorted(map(int, got)) == list(range(n))
    marks = [redelivered for b, _, redelivered in second.rows if b == 1]
    assert len(marks) == 1000
    assert marks == [sink_reads] * 1000
    assert not any(redelivered for b, _, redelivered in first.rows + second.rows if b != 1)
    stats = broker.settled(queue)
    assert stats["messageCount"] == 0 and stats["deliveringCount"] == 0


def test_available_now_under_leases_stops_at_the_depth_it_started_with(
        spark: Any, broker: Broker, tmp_path: Path) -> None:
    import threading

    broker.fill("depth", 3_000, prefix="old-")
    sink = Collected()
    stop = threading.Event()

    def keep_sending() -> None:
        from jmspy import ConnectionFactory, Queue

        with ConnectionFactory(broker.url).create_connection() as conn:
            session = conn.create_session()
            producer = session.create_producer(Queue("depth"))
            i = 0
            while not stop.is_set():
                producer.send(session.create_text_message(f"new-{i}"))
                i += 1
                stop.wait(0.005)  # paces the late producer at about 200 messages/s

    sender = threading.Thread(target=keep_sending, daemon=True)
    query = (stream(spark, broker, "depth", numPartitions="2", maxMessagesPerTrigger="1000")
             .writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True))
    started = query.start()
    while not sink.batches and started.isActive:  # the end is fixed before the first batch
        started.awaitTermination(0.05)
    sender.start()
    started.awaitTermination()
    stop.set()
    sender.join(10)
    texts = sink.texts()
    assert len(texts) == 3_000, len(texts)
    assert all(t.startswith("old-") for t in texts)


def test_num_partitions_on_a_topic_is_refused_at_start(spark: Any, broker: Broker) -> None:
    import pytest

    with pytest.raises(Exception, match="numPartitions reads queues"):
        (spark.readStream.format("jmspy").option("url", broker.url)
         .option("destination", "topic://prices").option("numPartitions", "2").load()
         .writeStream.format("console").start())
