"""The writers: ``df.write.format("jmspy")`` and ``writeStream.format("jmspy")``.

Each Spark task sends its partition on its own connection, in one transaction committed
when the task has sent every row: a task that fails leaves nothing behind. A task that
succeeded but is retried anyway (its commit's answer lost, a speculative copy) sends the
same rows again; each row carries a duplicate-detection id that is the same in every
attempt -- the write's id (made once on the driver), the micro-batch (streaming), the
partition and the row's place in it, or the row's own ``dup_id`` column -- so
``jmspy broker`` (and Artemis) drop the second copy: exactly once into them, at least
once into brokers without duplicate detection. Sends respect producer flow control: a
full broker holds the task, it does not fail it.
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

__all__ = ["BatchWriter", "Sent", "StreamWriter"]


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


def _write(options: SourceOptions, columns: list[str], rows: Iterator[Any],
           write_id: str) -> Sent:
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    batch = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
    prefix = f"{write_id}:{batch}:{partition}" if batch is not None else f"{write_id}:{partition}"
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
        return _write(self.options, self.columns, iterator, self.write_id)


class StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: SourceOptions, columns: list[str], write_id: str) -> None:
        self.options, self.columns, self.write_id = options, columns, write_id

    def write(self, iterator: Iterator[Any]) -> Sent:
        return _write(self.options, self.columns, iterator, self.write_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task already committed its own transaction."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Failed tasks committed nothing; successful ones stay (duplicates are dropped
        when Spark runs the batch again)."""
