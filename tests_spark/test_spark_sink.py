"""The ``jmspy`` Spark sink: each task's rows in one transaction; a task that fails (and
is retried) leaves exactly one copy in ``jmspy broker``; rows with the same ``dup_id``
land once; columns map back to the message; a streaming query copies a queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import Broker

from jmspy import ConnectionFactory, Queue


def _drain(broker: Broker, queue: str) -> list[Any]:
    out = []
    with ConnectionFactory(broker.url).create_connection() as conn:
        consumer = conn.create_session().create_consumer(Queue(queue))
        conn.start()
        while (m := consumer.receive(2.0)) is not None:
            out.append(m)
    return out


def test_100000_rows_with_a_task_failing_once_land_exactly_once(
        spark: Any, broker: Broker) -> None:
    from pyspark import TaskContext

    def fail_once(n: int) -> tuple[str]:
        ctx = TaskContext.get()
        if n == 75_000 and ctx is not None and ctx.attemptNumber() == 0:
            raise RuntimeError("injected task failure (the first attempt only)")
        return (str(n),)

    rdd = spark.sparkContext.parallelize(range(100_000), 4).map(fail_once)
    df = spark.createDataFrame(rdd, "text string")
    (df.write.format("jmspy").option("url", broker.url)
     .option("destination", "queue://sunk").mode("append").save())
    assert broker.stats("sunk")["messageCount"] == 100_000
    texts = [m.text for m in _drain(broker, "sunk")]
    assert sorted(map(int, texts)) == list(range(100_000))


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
