"""A data pipeline on Spark over jmspy: orders (JSON text) stream in from a queue, are
parsed and totalled per customer in 10-second event-time windows (a 30-second
watermark), and the totals go to another queue and to Parquet.

One command runs the whole thing on local[2] against a ``jmspy broker`` it starts itself
(``pip install 'jmspy[spark]'``; Java 17)::

    python docs/examples/spark_pipeline.py [--orders 3000] [--out /tmp/jmspy-pipeline]

It sends the orders, runs the query once through everything available
(``trigger(availableNow=True)``: every order is acknowledged only after Spark committed
its batch), then prints the totals read back from the output queue and from Parquet.
Run it from anywhere, the repository's root included: the broker, Spark's JVM and its
Python workers start in the output directory (Spark's own files go there too), and a
broker that dies is reported with its exit code and stderr (``children.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile

from children import Broker, ChildDied

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def send_orders(url: str, n: int) -> dict[str, float]:
    from jmspy import ConnectionFactory, Queue

    rng = random.Random(4)
    expected: dict[str, float] = {}
    base = 1_700_000_000_000
    with ConnectionFactory(url, persistentSendWindow=500).create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(Queue("orders"))
        for i in range(n):
            customer = f"c{rng.randrange(5)}"
            amount = round(rng.uniform(1, 100), 2)
            expected[customer] = round(expected.get(customer, 0.0) + amount, 2)
            order = {"customer": customer, "amount": amount, "ts": base + i * 10}
            producer.send(session.create_text_message(json.dumps(order)))
        # a last event two minutes later moves the watermark past every window above, so
        # append mode emits them all (its own window stays open: it is not a customer's)
        late = {"customer": "_watermark", "amount": 0.0, "ts": base + n * 10 + 120_000}
        producer.send(session.create_text_message(json.dumps(late)))
    return expected


def run(url: str, out: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from jmspy.spark import register

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    order = "customer STRING, amount DOUBLE, ts LONG"
    totals = (spark.readStream.format("jmspy").option("url", url)
              .option("destination", "queue://orders").load()
              .select(F.from_json("text", order).alias("o")).select("o.*")
              .withColumn("event_time", (F.col("ts") / 1000).cast("timestamp"))
              .withWatermark("event_time", "30 seconds")
              .groupBy(F.window("event_time", "10 seconds"), "customer")
              .agg(F.round(F.sum("amount"), 2).alias("total")))

    def publish(batch, batch_id):  # type: ignore[no-untyped-def]
        # dup_id: the window and the customer, so a micro-batch replayed after a crash
        # (its rows in any order, after the shuffle) lands once in jmspy broker
        rows = batch.select(
            F.to_json(F.struct(F.col("window.start").cast("string").alias("window"),
                               "customer", "total")).alias("text"),
            F.concat_ws("/", F.col("window.start").cast("string"), "customer").alias("dup_id"))
        rows.write.format("jmspy").option("url", url).option(
            "destination", "queue://totals").mode("append").save()
        batch.write.mode("append").parquet(os.path.join(out, "totals.parquet"))

    (totals.writeStream.outputMode("append").foreachBatch(publish)
     .option("checkpointLocation", os.path.join(out, "checkpoint"))
     .trigger(availableNow=True).start().awaitTermination())
    parquet = spark.read.parquet(os.path.join(out, "totals.parquet"))
    by_customer = {r.customer: r.total for r in
                   parquet.groupBy("customer").agg(F.round(F.sum("total"), 2).alias("total"))
                   .collect() if not r.customer.startswith("_")}
    print("totals from Parquet:", json.dumps(dict(sorted(by_customer.items()))))
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=3000)
    parser.add_argument("--out", default=None, help="output directory (a temporary one)")
    args = parser.parse_args()
    out = os.path.abspath(args.out or tempfile.mkdtemp(prefix="jmspy-pipeline-"))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    # Every child (the broker, Spark's JVM, which starts its Python workers with `-m`)
    # starts here: in a checkout's root, `-m` would import its jmspy/ source folder.
    os.chdir(out)
    try:
        broker = Broker(out)
    except ChildDied as exc:
        raise SystemExit(f"spark_pipeline: {exc}") from exc
    print(broker.banner)
    try:
        expected = send_orders(broker.url, args.orders)
        print("sent", args.orders, "orders; expected totals:",
              json.dumps(dict(sorted(expected.items()))))
        broker.check()
        run(broker.url, out)
        broker.check()
        from jmspy import ConnectionFactory, Queue

        windows = 0
        with ConnectionFactory(broker.url).create_connection() as conn:
            consumer = conn.create_session().create_consumer(Queue("totals"))
            conn.start()
            while consumer.receive(2.0) is not None:
                windows += 1
        print(f"queue://totals holds {windows} window totals; Parquet in {out}")
    except Exception as exc:
        try:
            broker.check()  # a dead broker is the cause; the step's error its symptom
        except ChildDied as died:
            raise SystemExit(f"spark_pipeline: {died}") from exc
        raise
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
