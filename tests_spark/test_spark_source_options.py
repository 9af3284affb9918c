"""The source's options beside Spark's Kafka source: a list of destinations and wildcard
names, ``minMessagesPerTrigger`` with ``maxTriggerDelay``, ``failOnDataLoss`` (messages
that expire or are dead-lettered before the query reads them), and typed properties.

Most of these drive the reader's driver-side calls (``latestOffset``, ``partitions``,
``read``, ``commit``) directly against ``jmspy broker``, as Spark's driver worker makes
them, with a fake clock where time matters; one query per option runs on Spark itself."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Broker
from polling import wait_until

from jmspy import ConnectionFactory, DeliveryMode, Queue, Topic
from jmspy.errors import InvalidConfigurationException
from jmspy.spark.data_loss import DataLossError, LossWatch
from jmspy.spark.options import parse_options
from jmspy.spark.receiving import Receivers
from jmspy.spark.rows import row_of, to_message
from jmspy.spark.stream import StreamReader


def reader(broker: Broker, destination: str, **options: str) -> StreamReader:
    return StreamReader(parse_options({"url": broker.url, "destination": destination,
                                       **options}))


def batch(r: StreamReader, start: dict[str, int]) -> tuple[dict[str, int], list[Any]]:
    """One trigger as Spark's driver makes it: the latest offset, the batch's rows, the
    commit of the batch; the rows and the offset it ended at."""
    end = r.latestOffset(start, r.getDefaultReadLimit())
    rows = [row for p in r.partitions(start, end) for row in r.read(p)]
    r.commit(end)
    return end, rows


def send(broker: Broker, destination: Any, texts: list[str], **options: Any) -> None:
    with ConnectionFactory(broker.url).create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(destination)
        for text in texts:
            producer.send(session.create_text_message(text),
                          delivery_mode=DeliveryMode.NON_PERSISTENT, **options)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- destinations ---------------------------------------------------------------------------
def test_a_list_of_queues_is_read_whole_and_each_message_once(broker: Broker) -> None:
    for name in ("la", "lb", "lc"):
        send(broker, Queue(name), [f"{name}-{i}" for i in range(300)])
    r = reader(broker, "queue://la, queue://lb,queue://lc", maxMessagesPerTrigger="200")
    start: dict[str, int] = {"seq": 0, "tick": 0}
    texts: list[str] = []
    first_batch: list[str] = []
    try:
        for _ in range(20):
            start, rows = batch(r, start)
            texts += [row[9] for row in rows]
            first_batch = first_batch or [row[9] for row in rows]
            if len(texts) == 900:
                break
    finally:
        r.stop()
    assert sorted(texts) == sorted(f"{n}-{i}" for n in ("la", "lb", "lc") for i in range(300))
    # taken in turn: the first batch of 200 already holds every queue's messages
    assert {t.split("-")[0] for t in first_batch} == {"la", "lb", "lc"}
    for name in ("la", "lb", "lc"):
        assert broker.settled(name)["messageCount"] == 0


def test_a_wildcard_topic_reads_every_topic_it_matches(broker: Broker) -> None:
    r = reader(broker, "topic://prices.>")
    start: dict[str, int] = {"seq": 0, "tick": 0}
    try:
        start, rows = batch(r, start)  # subscribes; nothing published yet
        assert rows == []
        send(broker, Topic("prices.eu.bund"), ["eu"])
        send(broker, Topic("prices.us"), ["us"])
        send(broker, Topic("other.us"), ["not matched"])
        got: list[str] = []
        for _ in range(50):
            start, rows = batch(r, start)
            got += [row[9] for row in rows]
            if len(got) >= 2:
                break
    finally:
        r.stop()
    assert sorted(got) == ["eu", "us"]
    assert [row for row in rows if row[1] == "topic://other.us"] == []


def test_availablenow_over_a_list_of_queues_ends_at_their_summed_depth(broker: Broker) -> None:
    send(broker, Queue("da"), [f"a{i}" for i in range(40)])
    send(broker, Queue("db"), [f"b{i}" for i in range(60)])
    r = reader(broker, "queue://da,queue://db", maxMessagesPerTrigger="30")
    r.prepareForTriggerAvailableNow()
    send(broker, Queue("da"), ["late"])  # after the start: for the next run
    start: dict[str, int] = {"seq": 0, "tick": 0}
    texts: list[str] = []
    try:
        for _ in range(10):
            end, rows = batch(r, start)
            if end == start:
                break
            start, texts = end, texts + [row[9] for row in rows]
    finally:
        r.stop()
    assert len(texts) == 100 and "late" not in texts


@pytest.mark.parametrize(("options", "says"), [
    ({"destination": "queue://a,orders"}, "must say its kind"),
    ({"destination": "queue://a,queue://a"}, "named twice"),
    ({"destination": "queue://a,", }, "must say its kind"),
    ({"destination": "topic://t,topic://u", "subscriptionName": "s", "clientID": "c"},
     "one topic://"),
    ({"destination": "queue://a", "minMessagesPerTrigger": "0"}, ">= 1"),
    ({"destination": "queue://a", "minMessagesPerTrigger": "50",
      "maxMessagesPerTrigger": "10"}, "no trigger could meet both"),
    ({"destination": "queue://a", "maxTriggerDelay": "5s"}, "set that too"),
    ({"destination": "queue://a", "minMessagesPerTrigger": "5", "maxTriggerDelay": "soon"},
     "must be a duration"),
    ({"destination": "queue://a", "failOnDataLoss": "maybe"}, "true or false"),
])
def test_bad_source_options_say_what_is_wrong(options: dict[str, str], says: str) -> None:
    with pytest.raises(InvalidConfigurationException, match=says):
        parse_options({"url": "stomp://127.0.0.1:1", **options})


def test_durations_read_as_kafka_writes_them() -> None:
    base = {"url": "stomp://127.0.0.1:1", "destination": "queue://a",
            "minMessagesPerTrigger": "5"}
    for text, ms in (("15m", 900_000), ("30s", 30_000), ("500ms", 500), ("1h", 3_600_000),
                     ("250", 250), ("1.5s", 1500)):
        assert parse_options({**base, "maxTriggerDelay": text}).max_trigger_delay_ms == ms
    assert parse_options(base).max_trigger_delay_ms == 15 * 60 * 1000  # Kafka's default


def test_the_sink_and_a_browse_refuse_a_list_of_destinations(spark: Any, broker: Broker) -> None:
    df = spark.createDataFrame([("x",)], "text STRING")
    with pytest.raises(Exception, match="takes one destination"):
        (df.write.format("jmspy").option("url", broker.url)
         .option("destination", "queue://a,queue://b").mode("append").save())


# -- minMessagesPerTrigger ------------------------------------------------------------------
def test_a_trigger_waits_for_the_minimum_until_the_delay_has_passed(broker: Broker) -> None:
    r = reader(broker, "queue://mins", minMessagesPerTrigger="5", maxTriggerDelay="10s")
    clock = r._clock = FakeClock()
    start: dict[str, int] = {"seq": 0, "tick": 0}
    try:
        send(broker, Queue("mins"), ["a", "b", "c"])
        end, rows = batch(r, start)
        assert (end, rows) == (start, [])  # 3 of 5: no batch yet
        clock.now += 9.0
        end, rows = batch(r, start)
        assert (end, rows) == (start, [])  # still inside maxTriggerDelay
        send(broker, Queue("mins"), ["d", "e"])
        end, rows = batch(r, start)
        assert end["seq"] == 5 and [row[9] for row in rows] == ["a", "b", "c", "d", "e"]
        start = end
        send(broker, Queue("mins"), ["f"])
        end, rows = batch(r, start)
        assert (end, rows) == (start, [])  # the delay counts from the last batch
        clock.now += 10.5
        end, rows = batch(r, start)
        assert end["seq"] == 6 and [row[9] for row in rows] == ["f"]  # the delay passed
    finally:
        r.stop()
    assert broker.settled("mins")["messageCount"] == 0


def test_availablenow_does_not_wait_for_the_minimum(broker: Broker) -> None:
    send(broker, Queue("minnow"), ["a", "b"])
    r = reader(broker, "queue://minnow", minMessagesPerTrigger="1000")
    r._clock = FakeClock()  # no time passes: only availableNow can end the wait
    r.prepareForTriggerAvailableNow()
    try:
        end, rows = batch(r, {"seq": 0, "tick": 0})
    finally:
        r.stop()
    assert end["seq"] == 2 and sorted(row[9] for row in rows) == ["a", "b"]


def test_a_spark_query_with_a_minimum_batches_at_least_that_many(
        spark: Any, broker: Broker, tmp_path: Path) -> None:
    send(broker, Queue("minq"), [str(i) for i in range(1000)])
    sizes: list[int] = []
    seen: list[str] = []
    lock = threading.Lock()

    def sink(df: Any, batch_id: int) -> None:
        texts = [row.text for row in df.select("text").collect()]
        with lock:
            if texts:
                sizes.append(len(texts))
            seen.extend(texts)

    query = (spark.readStream.format("jmspy").option("url", broker.url)
             .option("destination", "queue://minq").option("minMessagesPerTrigger", "400")
             .option("maxMessagesPerTrigger", "400").load()
             .writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "c")).start())
    try:
        deadline = time.monotonic() + 120
        while len(seen) < 800 and time.monotonic() < deadline:
            query.awaitTermination(0.5)  # waits for the two full batches
    finally:
        query.stop()
    assert sizes[:2] == [400, 400]  # the 200 left wait for 200 more (or 15 minutes)
    assert sorted(map(int, seen)) == list(range(800))


# -- failOnDataLoss ---------------------------------------------------------------------
def _expired(broker: Broker, queue: str, at_least: int) -> None:
    """The broker's expiry timers have fired for ``at_least`` of the queue's messages."""
    assert wait_until(lambda: broker.stats(queue).get("expired", 0) >= at_least, 30), \
        broker.stats(queue)


@pytest.mark.parametrize("fail", [False, True])
def test_messages_that_expire_unread_are_counted_and_fail_the_query_if_asked(
        broker: Broker, fail: bool) -> None:
    """The reader's consumer holds one message (flow limit 1); the other four expire in
    the queue before it reads them: lost to the query."""
    r = reader(broker, "queue://lossy", imqConsumerFlowLimit="1",
               failOnDataLoss=str(fail).lower())
    start: dict[str, int] = {"seq": 0, "tick": 0}
    try:
        start, _ = batch(r, start)  # the reader starts: its counters' baseline
        send(broker, Queue("lossy"), [f"m{i}" for i in range(5)], time_to_live=0.3)
        _expired(broker, "lossy", 4)
        if fail:
            with pytest.raises(DataLossError, match="expired"):
                r.latestOffset(start, r.getDefaultReadLimit())
            return
        end = r.latestOffset(start, r.getDefaultReadLimit())
        assert end["expired"] >= 4 and end["deadLettered"] == 0
        # a later offset keeps the running total, and one from a restart adds to it
        assert r.latestOffset(end, r.getDefaultReadLimit())["expired"] == end["expired"]
    finally:
        r.stop()


def test_loss_totals_carry_over_a_restart_and_a_broker_without_counters_is_refused() -> None:
    counters = {"expired": 10, "deadLettered": 3}
    watch = LossWatch([Queue("q")], lambda d: counters, fail=False)
    assert watch.offset_fields({"seq": 5}) == {}  # nothing lost: the offset as it was
    counters["expired"] += 1
    assert watch.offset_fields({"seq": 5}) == {"expired": 1, "deadLettered": 0}
    counters["expired"] += 2
    # this run started from an offset that already counted 7 + 1 from earlier runs
    restarted = LossWatch([Queue("q")], lambda d: counters, fail=True)
    counters["deadLettered"] += 1
    with pytest.raises(DataLossError, match=r"0 message\(s\) expired and 1 were dead-lettered"):
        restarted.offset_fields({"seq": 9, "expired": 7, "deadLettered": 1})
    with pytest.raises(Exception, match="reports no such counters"):
        LossWatch([Queue("q")], lambda d: {"messageCount": 1}, fail=True)
    quiet = LossWatch([Queue("q")], lambda d: {}, fail=False)
    assert quiet.offset_fields({"seq": 1}) == {}  # nothing known: the offsets say nothing


# -- receiving in turn ----------------------------------------------------------------------
class _Scripted:
    def __init__(self, items: list[str]) -> None:
        self.items = items
        self.waits: list[float] = []

    def receive(self, timeout: float | None = None) -> Any:
        self.waits.append(timeout or 0.0)
        return self.items.pop(0) if self.items else None

    def receive_no_wait(self) -> Any:
        return self.items.pop(0) if self.items else None


def test_receivers_take_in_turn_and_wait_in_slices_until_the_wait_is_spent() -> None:
    a, b = _Scripted(["a1", "a2", "a3"]), _Scripted(["b1"])
    clock = FakeClock()
    receivers = Receivers([a, b], clock=clock)  # type: ignore[list-item]
    assert [receivers.receive(1.0) for _ in range(4)] == ["a1", "b1", "a2", "a3"]

    def advance(timeout: float | None = None) -> Any:
        clock.now += timeout or 0.0
        return None

    a.receive = b.receive = advance  # type: ignore[method-assign]
    assert receivers.receive(0.05) is None  # gave up once 0.05 s had passed, no sooner
    assert clock.now == pytest.approx(1000.05)


# -- typed properties -----------------------------------------------------------------------
def test_typed_properties_keep_each_values_type_both_ways(broker: Broker) -> None:
    with ConnectionFactory(broker.url).create_connection() as conn:
        session = conn.create_session()
        m = session.create_text_message("typed")
        for name, value in (("n", 42), ("big", -(2**63)), ("ratio", 0.25), ("ok", False),
                            ("s", "7")):
            m.set_property(name, value)
        session.create_producer(Queue("typed")).send(m)
        consumer = session.create_consumer(Queue("typed"))
        conn.start()
        got = consumer.receive(10)
        assert got is not None
        row = row_of(got)
        typed = row[-1]
        assert typed["n"] == ("long", None, 42, None, None)
        assert typed["big"] == ("long", None, -(2**63), None, None)
        assert typed["ratio"] == ("double", None, None, 0.25, None)
        assert typed["ok"] == ("boolean", None, None, None, False)
        assert typed["s"] == ("string", "7", None, None, None)
        assert row[8] == {"n": "42", "big": str(-(2**63)), "ratio": "0.25", "ok": "false",
                          "s": "7"}
        back, _ = to_message(session, {"text": "again", "typed_properties": typed,
                                       "properties": {"n": "text, overridden"}})
        assert {k: back.get_property(k) for k in ("n", "big", "ratio", "ok", "s")} == {
            "n": 42, "big": -(2**63), "ratio": 0.25, "ok": False, "s": "7"}
        with pytest.raises(ValueError, match="type 'int' must be one of"):
            to_message(session, {"typed_properties": {"x": ("int", None, 1, None, None)}})


def test_typed_properties_reach_spark_as_a_map_of_structs(spark: Any, broker: Broker) -> None:
    with ConnectionFactory(broker.url).create_connection() as conn:
        session = conn.create_session()
        m = session.create_text_message("t")
        m.set_property("qty", 3)
        m.set_property("vip", True)
        session.create_producer(Queue("typedq")).send(m)
    row = (spark.read.format("jmspy").option("url", broker.url)
           .option("destination", "queue://typedq").load()
           .selectExpr("typed_properties['qty'].long AS qty",
                       "typed_properties['qty'].type AS qty_type",
                       "typed_properties['vip'].boolean AS vip").collect()[0])
    assert (row.qty, row.qty_type, row.vip) == (3, "long", True)
