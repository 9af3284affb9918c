"""A Spark driver for a standalone cluster, in its own process: reads queue ARGV[3] of the
broker at ARGV[2] on the executors of the cluster at ARGV[1] (``numPartitions`` ARGV[6],
``maxMessagesPerTrigger`` ARGV[7]) until the depth it started with, and writes each
micro-batch's rows to ARGV[5]/<batch> ("text redelivered" lines, renamed into place
whole). Checkpoint: ARGV[4].

ARGV[8], a folder: the first task attempt of partition 1 that finds ``armed`` in it takes
``fired`` (exclusively: one task in the whole job), writes its process id there and waits
to be killed with its worker; every other attempt runs straight through."""

from __future__ import annotations

import os
import sys

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def wait_to_be_killed(text: str, marker_dir: str) -> str:
    import time

    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None or context.partitionId() != 1:
        return text
    if not os.path.exists(os.path.join(marker_dir, "armed")):
        return text
    try:
        fd = os.open(os.path.join(marker_dir, "fired"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return text
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    time.sleep(600)  # waits for the test to SIGKILL this worker (it never returns)
    return text


def main() -> None:
    master, url, queue, checkpoint, out, parts, per_trigger, markers = sys.argv[1:9]
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import col, udf

    from jmspy.spark import register

    spark = (SparkSession.builder.master(master).appName("jmspy-cluster-test")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "512m")
             .config("spark.executor.cores", "1")
             .config("spark.task.maxFailures", "4")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)

    def sink(df, batch_id):  # type: ignore[no-untyped-def]
        rows = df.select("text", "redelivered").collect()
        tmp = os.path.join(out, f".{batch_id}")
        with open(tmp, "w") as f:
            f.write("".join(f"{r.text} {int(r.redelivered)}\n" for r in rows))
        os.rename(tmp, os.path.join(out, str(batch_id)))

    stall = udf(lambda text: wait_to_be_killed(text, markers), "string")
    df = (spark.readStream.format("jmspy").option("url", url)
          .option("destination", f"queue://{queue}").option("numPartitions", parts)
          .option("maxMessagesPerTrigger", per_trigger).load())
    (df.withColumn("text", stall(col("text"))).writeStream.foreachBatch(sink)
     .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
     .awaitTermination())
    spark.stop()


if __name__ == "__main__":
    main()
