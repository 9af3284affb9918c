"""The writers: ``df.write.format("jmspy")`` and ``writeStream.format("jmspy")``.

Exactly once into ``jmspy broker`` by construction: every message carries a duplicate
id (``_AMQ_DUPL_ID``) that is the same whenever Spark sends the same row again, and the
broker drops a second copy (its window, default 1,000,000 ids for 7 days, is kept in its
store, so it holds across broker restarts too). The id is the row's ``dup_id`` column, or
``WRITE:PARTITION:ROW`` where ``ROW`` is the row's place in its partition and ``WRITE``
is stable across everything Spark repeats:

* ``writeStream``: the query's id and the micro-batch, ``QUERY:BATCH``. The query id is
  Spark's, kept in the checkpoint (``metadata``), handed to every task as the local
  property ``sql.streaming.queryId``: the same after a task retry, a query restart from
  the checkpoint and a driver restart. A batch replayed after a crash between the sink's
  commit and Spark's commit log resends its rows under the same ids.
* ``df.write`` with the ``jobId`` option: ``JOBID`` (inside ``foreachBatch``,
  ``JOBID:QUERY:BATCH``, so each micro-batch's write has its own ids and a replayed
  batch repeats them). Without ``jobId``: an id made once per write on the driver, so
  task retries are exactly once and a re-run of the whole job is a new write.

Why this is needed even where each task sends in one transaction: when a task fails
*upstream* of the writer (a UDF, a shuffle read), PySpark ends the writer's input
iterator normally after the Arrow batches it already had, so the task's transaction
commits a *prefix* of its partition before the task fails and is retried. We do not try
to tell that prefix from a whole partition (the writer is not told how many rows the
planner gave it): the prefix's rows carry the same ids as in the retry, which the broker
drops. A job that fails on every attempt therefore leaves, per partition, a prefix of its
rows, each once; re-running it with the same ``jobId`` sends only the rest.

The ids assume a partition's rows come in the same order in every attempt (true for
deterministic plans: files, the jmspy source, which replays a batch's messages in their
queue order; not guaranteed after a shuffle without an order): otherwise give ``dup_id``
from a key of the row. Brokers without duplicate detection get at least once. Sends
respect producer flow control: a full broker holds the task, it does not fail it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from jmspy.wire.headers import DUPLICATE_ID

from .options import SourceOptions
from .rows import to_message

__all__ = ["BATCH_ID", "QUERY_ID", "BatchWriter", "Sent", "StreamWriter", "write_prefix"]


@dataclass
class Sent(WriterCommitMessage):
    """What one task committed."""

    partition: int
    rows: int


def _values(columns: list[str], row: Any) -> dict[str, Any]:
    """A row as a dict (Spark hands Row objects; plain tuples are read by position)."""
    if hasattr(row, "asDict"):
        return dict(row.asDict())
    return dict(zip(columns, row, strict=False))


#: The local properties Spark gives a streaming query's tasks (StreamExecution): the
#: query's id, kept in its checkpoint, and the micro-batch's.
QUERY_ID = "sql.streaming.queryId"
BATCH_ID = "streaming.sql.batchId"


def write_prefix(stream: bool, job_id: str | None, made: str, context: Any) -> str:
    """The ``WRITE`` part of the rows' ids (see the module docstring); ``made``: the id
    the driver made for this write, used when nothing stable is known."""
    query = batch = None
    if context is not None:
        query, batch = context.getLocalProperty(QUERY_ID), context.getLocalProperty(BATCH_ID)
    streaming = f"{query}:{batch}" if query and batch is not None else None
    if stream:
        return streaming or f"{made}:{batch}"
    if job_id:
        return f"{job_id}:{streaming}" if streaming else job_id
    return made


def _write(options: SourceOptions, columns: list[str], rows: Iterator[Any],
           write_id: str, stream: bool) -> Sent:
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    prefix = f"{write_prefix(stream, options.job_id, write_id, context)}:{partition}"
    sent = 0
    with options.factory().create_connection(options.user, options.password) as conn:
        session = conn.create_session(transacted=True)
        producer = session.create_producer(options.destination)
        for i, row in enumerate(rows):
            values = _values(columns, row)
            message, send = to_message(session, values)
            dup_id = values.get("dup_id")
            message.set_property(DUPLICATE_ID, str(dup_id) if dup_id else f"{prefix}:{i}")
            producer.send(message, **send)
            sent += 1
        session.commit()
    return Sent(partition, sent)


class BatchWriter(DataSourceWriter):
    def __init__(self, options: SourceOptions, columns: list[str], write_id: str) -> None:
        self.options, self.columns, self.write_id = options, columns, write_id

    def write(self, iterator: Iterator[Any]) -> Sent:
        return _write(self.options, self.columns, iterator, self.write_id, False)


class StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: SourceOptions, columns: list[str], write_id: str) -> None:
        self.options, self.columns, self.write_id = options, columns, write_id

    def write(self, iterator: Iterator[Any]) -> Sent:
        return _write(self.options, self.columns, iterator, self.write_id, True)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task already committed its own transaction."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """What the tasks committed stays (a failed task's prefix too, see the module
        docstring); Spark runs the batch again under the same ids, whose copies the broker
        drops."""
