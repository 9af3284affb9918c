"""The acknowledgement strategies (jmspy/acknowledgement.py) on a scripted session: what
each mode tells the broker, when, and what it hands back, with no transport or thread."""

from __future__ import annotations

from typing import Any

import pytest

from jmspy import AckMode, DeliveryMode, Session
from jmspy.acknowledgement import (
    AutoAcknowledge,
    ClientAcknowledge,
    DupsOkAcknowledge,
    IndividualAcknowledge,
    LocalTransaction,
    NoAcknowledge,
    new_acknowledgement,
)
from jmspy.errors import IllegalStateException, JMSException, TransactionRolledBackException
from jmspy.message import TextMessage


class Transport:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail_commit = False

    def ack(self, tags: list[int], tx: str | None = None) -> None:
        self.calls.append(("ack", list(tags), tx))

    busy = False  # try_ack declines (another thread holds an in-process broker's lock)

    def try_ack(self, tags: list[int]) -> bool:
        if self.busy:
            return False
        self.calls.append(("ack", list(tags), None))
        return True

    def begin(self, tx: str) -> None:
        self.calls.append(("begin", tx))

    def commit(self, tx: str) -> None:
        self.calls.append(("commit", tx))
        if self.fail_commit:
            raise JMSException("refused by the broker")

    def rollback(self, tx: str) -> None:
        self.calls.append(("rollback", tx))


class Connection:
    _instance = 7
    _dead_tag_floor = 0
    drops = 0

    @property
    def dead_tag_floor(self) -> int:
        return self._dead_tag_floor
    #: the CONNECTION_LOST error once the transport gave up (jmspy.connection.Connection)
    _lost: JMSException | None = None

    def _dead(self, tag: int) -> bool:
        return tag <= self._dead_tag_floor


class Consumer:
    def __init__(self, name: str, buffered: bool = False) -> None:
        self.name = name
        self.consumed = 0
        self.buffered = buffered

    def _consumed(self, n: int, drops: int) -> None:
        self.consumed += n

    def _has_buffered(self) -> bool:
        return self.buffered


class Host:
    """The session side of the strategies (jmspy.acknowledgement.AckHost)."""

    def __init__(self) -> None:
        self._connection = Connection()
        self._transport = Transport()
        self.in_listener = False
        self.returned: list[tuple[list[tuple[str, int]], str | None]] = []
        self.redelivered: list[int] = []

    def _check_open(self) -> None:
        pass

    def _in_listener(self) -> bool:
        return self.in_listener

    def _return_to_broker(self, items: list[Any], *, rollback: str | None) -> None:
        self.returned.append(([(c.name, tag) for c, tag in items], rollback))

    def _redeliver(self, consumer: Any, message: Any) -> None:
        self.redelivered.append(message._delivery_tag)


def message(tag: int) -> TextMessage:
    m = TextMessage("x")
    m._delivery_tag = tag
    return m


def make(mode: AckMode, **kw: int) -> tuple[Host, Any]:
    host = Host()
    strategy = new_acknowledgement(
        host, mode, auto_batch=kw.get("auto_batch", 128), dups_batch=kw.get("dups_batch", 3)
    )
    return host, strategy


def test_the_jms_constants_are_the_enums() -> None:
    assert Session.AUTO_ACKNOWLEDGE is AckMode.AUTO_ACKNOWLEDGE == 1
    assert Session.SESSION_TRANSACTED == 0 and Session.CLIENT_ACKNOWLEDGE == 2
    assert Session.DUPS_OK_ACKNOWLEDGE == 3 and Session.INDIVIDUAL_ACKNOWLEDGE == 4
    assert Session.NO_ACKNOWLEDGE == 100
    assert DeliveryMode.PERSISTENT == 2 and DeliveryMode(1) is DeliveryMode.NON_PERSISTENT


@pytest.mark.parametrize(
    ("mode", "cls"),
    [
        (AckMode.AUTO_ACKNOWLEDGE, AutoAcknowledge),
        (AckMode.DUPS_OK_ACKNOWLEDGE, DupsOkAcknowledge),
        (AckMode.CLIENT_ACKNOWLEDGE, ClientAcknowledge),
        (AckMode.INDIVIDUAL_ACKNOWLEDGE, IndividualAcknowledge),
        (AckMode.NO_ACKNOWLEDGE, NoAcknowledge),
        (AckMode.SESSION_TRANSACTED, LocalTransaction),
    ],
)
def test_one_strategy_per_mode(mode: AckMode, cls: type) -> None:
    _, strategy = make(mode)
    assert type(strategy) is cls and strategy.mode is mode
    # only AUTO lets the dispatcher queue acknowledgements; only AUTO/DUPS_OK redeliver a
    # failed listener's message; only NO_ACKNOWLEDGE has the broker forget at delivery
    assert (strategy.batch > 0) == (mode is AckMode.AUTO_ACKNOWLEDGE)
    assert strategy.redelivers_failures == (
        mode in (AckMode.AUTO_ACKNOWLEDGE, AckMode.DUPS_OK_ACKNOWLEDGE)
    )
    assert strategy.broker_forgets == (mode is AckMode.NO_ACKNOWLEDGE)


def test_auto_acks_each_processed_message_and_redelivers_a_failed_one() -> None:
    host, auto = make(AckMode.AUTO_ACKNOWLEDGE)
    c = Consumer("c")
    auto.delivered(c, message(1))
    auto.processed(c, message(1), True)
    auto.processed(c, message(2), False)
    assert host._transport.calls == [("ack", [1], None)]
    assert c.consumed == 1 and host.redelivered == [2]


def test_auto_recover_inside_a_listener_asks_the_dispatcher_to_redeliver() -> None:
    host, auto = make(AckMode.AUTO_ACKNOWLEDGE)
    auto.recover()
    assert not auto.recover_requested  # outside a listener nothing is unacknowledged
    host.in_listener = True
    auto.recover()
    assert auto.recover_requested


def test_held_acks_go_out_together_on_flush_in_order() -> None:
    host, auto = make(AckMode.AUTO_ACKNOWLEDGE)
    a, b = Consumer("a"), Consumer("b")
    for tag, c in ((1, a), (2, b), (3, a)):
        auto.hold((c, tag))
    assert host._transport.calls == []
    auto.flush()
    assert host._transport.calls == [("ack", [1, 2, 3], None)]
    assert (a.consumed, b.consumed) == (2, 1)


def test_a_flush_the_transport_declines_keeps_the_acks_queued_in_order() -> None:
    host, auto = make(AckMode.AUTO_ACKNOWLEDGE)
    a, b = Consumer("a"), Consumer("b")
    auto.hold((a, 1))
    auto.hold((b, 2))
    host._transport.busy = True
    assert auto.flush(wait=False) is False
    assert host._transport.calls == [] and (a.consumed, b.consumed) == (0, 0)
    assert auto.held_count() == 2
    auto.hold((a, 3))  # queued after the declined offer: stays behind it
    host._transport.busy = False
    assert auto.flush(wait=False) is True
    assert host._transport.calls == [("ack", [1, 2, 3], None)]
    assert (a.consumed, b.consumed) == (2, 1) and auto.held_count() == 0


def test_a_waiting_flush_never_asks_whether_the_transport_is_busy() -> None:
    host, auto = make(AckMode.AUTO_ACKNOWLEDGE)
    c = Consumer("c")
    auto.hold((c, 1))
    host._transport.busy = True
    assert auto.flush() is True
    assert host._transport.calls == [("ack", [1], None)] and c.consumed == 1


def test_dups_ok_acks_in_batches_and_when_the_buffer_runs_dry() -> None:
    host, dups = make(AckMode.DUPS_OK_ACKNOWLEDGE, dups_batch=3)
    c = Consumer("c", buffered=True)
    for tag in (1, 2, 3, 4):
        dups.processed(c, message(tag), True)
    assert host._transport.calls == [("ack", [1, 2, 3], None)]
    c.buffered = False
    dups.processed(c, message(5), True)
    assert host._transport.calls[-1] == ("ack", [4, 5], None)


def test_dups_ok_failure_acks_what_came_before_then_redelivers() -> None:
    host, dups = make(AckMode.DUPS_OK_ACKNOWLEDGE, dups_batch=10)
    c = Consumer("c", buffered=True)
    dups.processed(c, message(1), True)
    dups.processed(c, message(2), False)
    assert host._transport.calls == [("ack", [1], None)] and host.redelivered == [2]


def test_client_acknowledge_consumes_everything_the_session_delivered() -> None:
    host, client = make(AckMode.CLIENT_ACKNOWLEDGE)
    a, b = Consumer("a"), Consumer("b")
    m1, m2, m3 = message(1), message(2), message(3)
    client.delivered(a, m1)
    client.delivered(b, m2)
    client.delivered(a, m3)
    m2.acknowledge()  # any message acknowledges them all
    assert host._transport.calls == [("ack", [1, 2, 3], None)]
    assert (a.consumed, b.consumed) == (2, 1)
    m1.acknowledge()
    assert len(host._transport.calls) == 1  # nothing left to acknowledge


def test_individual_acknowledge_consumes_only_that_message() -> None:
    host, ind = make(AckMode.INDIVIDUAL_ACKNOWLEDGE)
    c = Consumer("c")
    m1, m2 = message(1), message(2)
    ind.delivered(c, m1)
    ind.delivered(c, m2)
    m2.acknowledge()
    assert host._transport.calls == [("ack", [2], None)]
    ind.recover()
    assert host.returned == [([("c", 1)], None)]


def test_recover_returns_unacknowledged_in_delivery_order() -> None:
    host, client = make(AckMode.CLIENT_ACKNOWLEDGE)
    a, b = Consumer("a"), Consumer("b")
    client.delivered(a, message(5))
    client.delivered(b, message(6))
    client.recover()
    assert host.returned == [([("a", 5), ("b", 6)], None)]
    assert client.take_unacknowledged() == []


def test_no_acknowledge_consumes_at_delivery_and_has_nothing_to_recover() -> None:
    host, none = make(AckMode.NO_ACKNOWLEDGE)
    c = Consumer("c")
    none.delivered(c, message(1))
    none.processed(c, message(1), True)
    none.recover()
    assert c.consumed == 1 and host._transport.calls == [] and host.returned == []


def test_a_message_of_a_dropped_connection_is_not_acknowledged() -> None:
    host, client = make(AckMode.CLIENT_ACKNOWLEDGE)
    host._connection._dead_tag_floor = 10
    m = message(9)
    client.delivered(Consumer("c"), m)
    m.acknowledge()
    assert host._transport.calls == []


def test_closing_a_consumer_hands_back_its_held_acks_only() -> None:
    _, auto = make(AckMode.AUTO_ACKNOWLEDGE)
    a, b = Consumer("a"), Consumer("b")
    auto.hold((a, 1))
    auto.hold((b, 2))
    auto.hold((a, 3))
    assert auto.forget(a) == [1, 3]
    assert auto.forget(a) == []
    assert auto.forget(b) == [2]


def test_transaction_commit_acks_in_the_transaction_and_begins_the_next() -> None:
    host, tx = make(AckMode.SESSION_TRANSACTED)
    first = tx.tx
    c = Consumer("c")
    tx.delivered(c, message(1))
    tx.delivered(c, message(2))
    tx.commit()
    assert host._transport.calls == [
        ("begin", first), ("ack", [1, 2], first), ("commit", first), ("begin", tx.tx)
    ]
    assert tx.tx != first and c.consumed == 2


def test_transaction_rollback_returns_received_messages_with_the_rollback() -> None:
    host, tx = make(AckMode.SESSION_TRANSACTED)
    first = tx.tx
    tx.delivered(Consumer("c"), message(4))
    tx.rollback()
    assert host.returned == [([("c", 4)], first)]
    assert tx.tx != first


def test_a_refused_commit_rolls_back_and_says_so() -> None:
    host, tx = make(AckMode.SESSION_TRANSACTED)
    first = tx.tx
    host._transport.fail_commit = True
    tx.delivered(Consumer("c"), message(1))
    with pytest.raises(TransactionRolledBackException, match="refused by the broker"):
        tx.commit()
    assert host.returned == [([("c", 1)], first)]


def test_commit_after_the_connection_dropped_fails_instead_of_half_happening() -> None:
    host, tx = make(AckMode.SESSION_TRANSACTED)
    tx.delivered(Consumer("c"), message(1))
    tx.connection_interrupted()
    tx.connection_resumed()
    with pytest.raises(TransactionRolledBackException, match="interrupted"):
        tx.commit()
    assert not any(call[0] == "ack" for call in host._transport.calls)


def test_commit_after_the_connection_was_lost_says_why_it_was_lost() -> None:
    host, tx = make(AckMode.SESSION_TRANSACTED)
    tx.delivered(Consumer("c"), message(1))
    tx.connection_interrupted()
    host._connection._lost = JMSException("the broker closed it after its ERROR: too big")
    with pytest.raises(TransactionRolledBackException) as raised:
        tx.commit()
    assert str(raised.value).count("too big") == 1


def test_transaction_calls_are_refused_outside_a_transaction() -> None:
    _, client = make(AckMode.CLIENT_ACKNOWLEDGE)
    with pytest.raises(IllegalStateException, match="non-transacted"):
        client.commit()
    with pytest.raises(IllegalStateException, match="recover"):
        client.rollback()
    _, tx = make(AckMode.SESSION_TRANSACTED)
    with pytest.raises(IllegalStateException, match="rollback"):
        tx.recover()


def test_acknowledge_messages_acknowledges_exactly_those_in_one_call(vm_broker):
    from jmspy import ConnectionFactory, Queue, Session
    from jmspy.errors import IllegalStateException

    factory = ConnectionFactory(f"vm://{vm_broker.name}")
    with factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.INDIVIDUAL_ACKNOWLEDGE)
        producer = session.create_producer(Queue("many"))
        for i in range(10):
            producer.send(session.create_text_message(str(i)))
        consumer = session.create_consumer(Queue("many"))
        conn.start()
        got = [consumer.receive(5.0) for _ in range(10)]
        session.acknowledge_messages([m for m in got if int(m.text) % 2 == 0])
        assert vm_broker.stats("many")["messageCount"] == 5  # the odd ones are still out
        session.acknowledge_messages(got)  # acknowledged ones are skipped, the rest go
        assert vm_broker.stats("many")["messageCount"] == 0
        client = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        with pytest.raises(IllegalStateException, match="INDIVIDUAL_ACKNOWLEDGE"):
            client.acknowledge_messages([])
