"""A Spark driver in its own process (the SIGKILL test kills it): reads queue ARGV[2] of
the broker at ARGV[1] as a stream with checkpoint ARGV[3] and writes each micro-batch's
rows to ARGV[4]/<run>-<batch> ("text redelivered" lines, renamed into place whole).
ARGV[5]: "available-now" (run to the end) or "forever" (until killed)."""

from __future__ import annotations

import os
import sys

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def main() -> None:
    url, queue, checkpoint, out, mode = sys.argv[1:6]
    from pyspark.sql import SparkSession

    from jmspy.spark import register

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    run = os.getpid()

    def sink(df, batch_id):  # type: ignore[no-untyped-def]
        rows = df.select("text", "redelivered").collect()
        tmp = os.path.join(out, f".{run}-{batch_id}")
        with open(tmp, "w") as f:
            f.write("".join(f"{r.text} {int(r.redelivered)}\n" for r in rows))
        os.rename(tmp, os.path.join(out, f"{run}-{batch_id}"))

    writer = (spark.readStream.format("jmspy").option("url", url)
              .option("destination", f"queue://{queue}").option("maxMessagesPerTrigger", "500")
              .load().writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint))
    if mode == "available-now":
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        writer.trigger(processingTime="500 milliseconds").start().awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
