"""``Broker.defer_dispatch``: a protocol server writes its replies (the RECEIPT a producer
waits for) before the delivery work its client's SENDs cause. Sent messages wait, ready
and counted, until ``dispatch_deferred``, which delivers them in send order, as one run
per consumer; ring queues (seed 000) and AMPS queues (seed 001) keep dispatching during
the send, so what they evict, lease or refuse is unchanged."""

from __future__ import annotations

from typing import Any

from core_support import FakeClock, Recorder, msg, tmsg

from jmspy.broker_ref.core import AddressSettings, Broker, DestinationKind, ServerConnection

Q = DestinationKind.QUEUE
T = DestinationKind.TOPIC


class RunRecorder(Recorder):
    """Also a BatchSessionCallback: records each run the broker hands over at once."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[list[Any]] = []

    def deliver_many(self, consumer_id: int, first_tag: int, messages: list[Any],
                     delivery_counts: list[int]) -> None:
        self.runs.append([m.body for m in messages])


def test_sends_wait_ready_until_dispatch_deferred_then_arrive_in_order(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "q", credit=10)
    assert broker.defer_dispatch()
    for body in "AB":
        conn.send(msg("q", body))
    conn.send(msg("q", "C", expiration=broker.now() + 60_000))  # Queue._enqueue_full's path
    assert rec.take() == []
    st = broker.stats("q")
    assert (st.message_count, st.delivering_count, st.enqueued) == (3, 0, 3)
    broker.dispatch_deferred()
    assert rec.bodies() == ["A", "B", "C"]
    assert broker.deferred_dispatch is None
    conn.send(msg("q", "D"))  # no longer deferred: delivered during the send
    assert rec.bodies() == ["D"]


def test_the_deferred_sends_of_one_read_reach_a_consumer_as_one_run(broker: Broker) -> None:
    rec = RunRecorder()
    conn = broker.connect(rec)
    conn.create_consumer(1, Q, "q", credit=10)
    broker.defer_dispatch()
    for body in "ABC":
        conn.send(msg("q", body))
    broker.dispatch_deferred()
    assert rec.runs == [["A", "B", "C"]]


def test_a_nested_deferral_leaves_the_dispatch_to_the_first_caller(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "q", credit=10)
    assert broker.defer_dispatch()
    assert not broker.defer_dispatch()
    conn.send(msg("q", "A"))
    assert rec.take() == [] and broker.deferred_dispatch is not None
    broker.dispatch_deferred()
    assert rec.bodies() == ["A"]


def test_a_ring_queue_still_dispatches_during_the_send(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    """Ring 3 and A, B, C, D with a consumer that has credit: each is delivered as it
    arrives, so none is evicted, deferral or not."""
    broker.create_queue("ring", ring_size=3)
    conn.create_consumer(1, Q, "ring", credit=10)
    broker.defer_dispatch()
    for body in "ABCD":
        conn.send(msg("ring", body))
    assert rec.bodies() == ["A", "B", "C", "D"]
    broker.dispatch_deferred()
    assert rec.take() == [] and broker.stats("ring").messages_replaced == 0


def test_an_amps_queue_still_dispatches_during_the_send(clock: FakeClock) -> None:
    broker = Broker(clock=clock, settings={"amps.#": AddressSettings(lease_period_ms=1000)})
    rec = Recorder()
    conn = broker.connect(rec)
    conn.create_consumer(1, Q, "amps.q", credit=10)
    broker.defer_dispatch()
    conn.send(msg("amps.q", "A"))
    assert rec.bodies() == ["A"]
    broker.dispatch_deferred()


def test_topic_subscribers_and_committed_sends_are_delivered_by_the_deferred_dispatch(
    broker: Broker, rec: Recorder
) -> None:
    conn = broker.connect(rec)
    other = Recorder()
    conn2 = broker.connect(other)
    conn.create_consumer(1, T, "news", credit=10)
    conn2.create_consumer(1, T, "news", credit=10)
    conn.create_consumer(2, Q, "q", credit=10)
    conn.begin("tx")
    conn.send(msg("q", "in-tx"), "tx")
    broker.defer_dispatch()
    conn.send(tmsg("news", "N"))
    conn.commit("tx")
    assert rec.take() == [] and other.take() == []
    broker.dispatch_deferred()
    assert sorted(rec.bodies()) == ["N", "in-tx"] and other.bodies() == ["N"]


def test_a_message_without_a_consumer_waits_as_before_and_a_deleted_queue_is_skipped(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    temp = conn.create_temporary_queue()
    conn.create_consumer(1, Q, temp, credit=10)
    broker.defer_dispatch()
    conn.send(msg("alone", "A"))
    conn.send(msg(temp, "T"))
    conn.close_consumer(1)
    conn.delete_temporary_queue(temp)
    broker.dispatch_deferred()
    assert rec.take() == []
    conn.create_consumer(2, Q, "alone", credit=10)
    assert rec.bodies() == ["A"]
