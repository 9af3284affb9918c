"""PySpark data source and sink for jmspy destinations (``pip install 'jmspy[spark]'``).

::

    from jmspy.spark import register
    register(spark)
    stream = (spark.readStream.format("jmspy")
              .option("url", "stomp://127.0.0.1:61613")
              .option("destination", "queue://orders").load())

See docs/spark.md: the options (:mod:`.options`), the columns (:mod:`.rows`), the
at-least-once streaming read (:mod:`.stream`), browse (:mod:`.source`) and the
exactly-once-into-jmspy-broker sink (:mod:`.sink`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the ``jmspy`` format with a SparkSession."""
    from .source import JmspySource

    spark.dataSource.register(JmspySource)
