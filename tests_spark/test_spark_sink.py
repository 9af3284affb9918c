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
    rows = [(f"r{i}", f"id-{i}", {"k": str(i)}, 7, "corr", "NON_PERSISTENT", "queue://back")
            for i in range(50)]
    df = spark.createDataFrame(
        rows, "text string, dup_id string, properties map<string,string>, priority int, "
        "correlation_id string, delivery_mode string, reply_to string")
    for _ in range(2):  # the same write again: a retried job
        (df.write.format("jmspy").option("url", broker.url)
         .option("destination", "queue://once").mode("append").save())
    got = _drain(broker, "once")
    assert sorted(m.text for m in got) == sorted(f"r{i}" for i in range(50))
    m = next(m for m in got if m.text == "r3")
    assert (m.get_property("k"), m.priority, m.correlation_id) == ("3", 7, "corr")
    assert m.delivery_mode == 1  # NON_PERSISTENT
    assert str(m.reply_to) == "queue://back"


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


def _files(folder: Path, files: int, rows: int) -> None:
    folder.mkdir()
    for f in range(files):
        (folder / f"part-{f}.json").write_text(
            "".join(f'{{"text": "{f * rows + i}"}}\n' for i in range(rows)))


def _copy_files(spark: Any, broker: Broker, src: Path, ckpt: Path, how: str) -> None:
    """Stream the JSON files under ``src`` into queue://restarted, a file a micro-batch,
    through the sink (``how`` = "sink") or ``foreachBatch`` + ``df.write`` with a jobId."""
    stream = (spark.readStream.format("json").schema("text string")
              .option("maxFilesPerTrigger", 1).load(str(src)))
    if how == "sink":
        writer = (stream.writeStream.format("jmspy").option("url", broker.url)
                  .option("destination", "queue://restarted"))
    else:
        def publish(df: Any, batch_id: int) -> None:
            (df.write.format("jmspy").option("url", broker.url).option("jobId", "copy")
             .option("destination", "queue://restarted").mode("append").save())

        writer = stream.writeStream.foreachBatch(publish)
    (writer.option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
     .awaitTermination())


@pytest.mark.parametrize(("how", "restart_broker"), [
    ("sink", False), ("sink", True), ("foreachBatch", True)])
def test_a_query_restarted_between_the_sinks_commit_and_sparks_commit_log_is_exact(
        spark: Any, stored_broker: Broker, tmp_path: Path, how: str,
        restart_broker: bool) -> None:
    """A crash after the sink committed batch N and before Spark wrote commits/N: the
    restarted query runs batch N again (its offsets are in the checkpoint). Simulated
    exactly: the last commit-log file is deleted before the restart. Its rows come again
    under the same ids (the query id is the checkpoint's), and the broker drops them --
    also after the broker itself restarted (SIGKILL) in between: the ids are in its store."""
    broker = stored_broker
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    _files(src, 5, 1000)
    _copy_files(spark, broker, src, ckpt, how)
    assert broker.stats("restarted")["messageCount"] == 5000
    commits = sorted((ckpt / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert [p.name for p in commits][-1] == "4"
    commits[-1].unlink()  # the sink committed batch 4; Spark's commit log never said so
    (ckpt / "commits" / ".4.crc").unlink(missing_ok=True)  # (its checksum file with it)
    if restart_broker:
        broker.restart(kill=True)
    _copy_files(spark, broker, src, ckpt, how)  # restarts from the checkpoint
    assert (ckpt / "commits" / "4").exists()  # batch 4 ran again
    stats = broker.stats("restarted")
    assert stats["duplicatesDropped"] == 1000  # its 1,000 rows came again, and were dropped
    assert sorted(int(m.text) for m in _drain(broker, "restarted")) == list(range(5000))
