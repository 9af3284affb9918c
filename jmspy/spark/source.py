"""The ``jmspy`` Spark data source: a batch reader that browses, the streaming reader
(:mod:`.stream`), and the batch and streaming writers (:mod:`.sink`).

``spark.read.format("jmspy")`` returns a queue's current contents and consumes nothing
(a QueueBrowser): a batch read has no commit hook, so a draining batch read could only be
at-most-once. To consume once, use ``readStream`` with ``trigger(availableNow=True)``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from jmspy.destinations import Queue
from jmspy.errors import InvalidConfigurationException

from .options import SourceOptions, parse_options
from .rows import SCHEMA, row_of
from .sink import BatchWriter, StreamWriter
from .stream import StreamReader

__all__ = ["JmspySource"]


class JmspySource(DataSource):
    """``format("jmspy")``; options in :mod:`.options`, columns in :mod:`.rows`."""

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.parsed: SourceOptions = parse_options(dict(options))

    @classmethod
    def name(cls) -> str:
        return "jmspy"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        self.parsed.one_destination("a batch read (a browse)")
        if self.parsed.kind != "queue":
            raise InvalidConfigurationException(
                f"jmspy data source: a batch read browses a queue, and "
                f"{self.parsed.describe()} is a topic, which keeps no backlog to browse; "
                "read a topic with readStream")
        return BrowseReader(self.parsed)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(self.parsed)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        self.parsed.one_destination("the sink")
        return BatchWriter(self.parsed, schema.fieldNames(), uuid.uuid4().hex)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        self.parsed.one_destination("the sink")
        return StreamWriter(self.parsed, schema.fieldNames(), uuid.uuid4().hex)


class BrowseReader(DataSourceReader):
    """One partition that browses the queue (on an executor, with its own connection)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        opts = self.options
        with opts.factory().create_connection(opts.user, opts.password) as conn:
            session = conn.create_session()
            browser = session.create_browser(Queue(opts.name), opts.selector)
            for message in browser:
                yield row_of(message)
