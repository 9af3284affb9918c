"""The ``jmspy`` Spark sink: each task's rows in one transaction; a task that fails (and
is retried) leaves exactly one copy in ``jmspy broker``; rows with the same ``dup_id``
land once; columns map back to the message; a streaming query copies a queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Broker

from jmspy import ConnectionFactory, Queue


def _drain(broker: Broker, queue: str, *, keep: bool = False) -> list[Any]:
    """Every message of ``queue`` (``keep``: browsed, left in the queue)."""
    out = []
    with ConnectionFactory(broker.url).create_connection() as conn:
        session = conn.create_session()
        if keep:
            return list(session.create_browser(Queue(queue)))
        consumer = session.create_consumer(Queue(queue))
        conn.start()
        while (m := consumer.receive(2.0)) is not None:
            out.append(m)
    return out


def _failing_rows(spark: Any, n: int, parts: int, fail_at: int, attempts: int) -> Any:
    """``n`` rows ("0".."n-1") in ``parts`` partitions; each partition's task fails at its
    row ``fail_at`` in its first ``attempts`` attempts (upstream of the writer, in a UDF)."""
    from pyspark import TaskContext

    per = n // parts

    def fail_in_the_middle(i: int) -> tuple[str]:
        ctx = TaskContext.get()
        if i % per == fail_at and ctx is not None and ctx.attemptNumber() < attempts:
            raise RuntimeError(f"injected failure at row {fail_at} of the partition")
        return (str(i),)

    rdd = spark.sparkContext.parallelize(range(n), parts).map(fail_in_the_middle)
    return spark.createDataFrame(rdd, "text string")


def test_100000_rows_with_every_partition_failing_once_in_its_middle_land_exactly_once(
        spark: Any, broker: Broker) -> None:
    # row 20,000 of each 25,000: PySpark hands the writer the first 10,000 (an Arrow batch)
    # and then ends its input normally, and the task fails after the writer's commit
    df = _failing_rows(spark, 100_000, 4, fail_at=20_000, attempts=1)
    (df.write.format("jmspy").option("url", broker.url)
     .option("destination", "queue://sunk").mode("append").save())
    stats = broker.stats("sunk")
    assert stats["messageCount"] == 100_000
    # the first attempts committed a prefix of their partitions (PySpark ended their input
    # early): the retries' copies of those rows were dropped by their ids
    assert stats["duplicatesDropped"] > 0
    texts = [m.text for m in _drain(broker, "sunk")]
    assert sorted(map(int, texts)) == list(range(100_000))


def test_a_job_failing_on_every_attempt_leaves_prefixes_once_and_its_rerun_the_rest(
        spark: Any, broker: Broker) -> None:
    """What a job that never succeeds leaves: per partition, a prefix of its rows before
    the failing one (each attempt commits the Arrow batches it got, with the same ids), each
    row once; the job run again with the same jobId sends exactly the others."""
    n, parts, fail_at = 50_000, 2, 20_000
    per = n // parts
    df = _failing_rows(spark, n, parts, fail_at=fail_at, attempts=99)
    with pytest.raises(Exception, match="injected failure"):
        (df.write.format("jmspy").option("url", broker.url).option("jobId", "load-7")
         .option("destination", "queue://left").mode("append").save())
    left = sorted(int(m.text) for m in _drain(broker, "left", keep=True))
    assert len(left) == len(set(left))  # each once, whatever the attempts
    for p in range(parts):
        mine = [i - p * per for i in left if p * per <= i < (p + 1) * per]
        assert mine == list(range(len(mine)))  # a prefix...
        assert len(mine) < fail_at  # ...of the rows before the failing one
    (_failing_rows(spark, n, parts, fail_at=fail_at, attempts=0).write.format("jmspy")
     .option("url", broker.url).option("jobId", "load-7")
     .option("destination", "queue://left").mode("append").save())
    assert sorted(int(m.text) for m in _drain(broker, "left")) == list(range(n))
    assert broker.stats("left")["duplicatesDropped"] >= len(left)


def test_rows_with_the_same_dup_id_land_once_and_columns_map_back(
        spark: Any, broker: Broker) -> None:
    rows = [(f"r{i}", f"id-{i}", {"k": str(i)}, 7, "corr", "NON_PERSISTENT")
            for i in range(50)]
    df = spark.createDataFrame(
        rows, "text string, dup_id string, properties map<string,string>, priority int, "
        "correlation_id string, delivery_mode string")
    for _ in range(2):  # the same write again: a retried job
        (df.write.format("jmspy").option("url", broker.url)
         .option("destination", "queue://once").mode("append").save())
    got = _drain(broker, "once")
    assert sorted(m.text for m in got) == sorted(f"r{i}" for i in range(50))
    m = next(m for m in got if m.text == "r3")
    assert (m.get_property("k"), m.priority, m.correlation_id) == ("3", 7, "corr")
    assert m.delivery_mode == 1  # NON_PERSISTENT


def test_a_streaming_query_copies_one_queue_into_another(
        spark: Any, broker: Broker, tmp_path: Path) -> None:
    broker.fill("source", 2000)
    query = (spark.readStream.format("jmspy").option("url", broker.url)
             .option("destination", "queue://source").load()
             .select("text", "properties")
             .writeStream.format("jmspy").option("url", broker.url)
             .option("destination", "queue://copy")
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert sorted(int(m.text) for m in _drain(broker, "copy")) == list(range(2000))
    assert broker.stats("source")["messageCount"] == 0
