"""Acknowledgement modes, transactions and redelivery over vm://."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jmspy import Connection, MessageConsumer, Queue, Session, TextMessage


def send_texts(session: Session, queue: Queue, *texts: str) -> None:
    producer = session.create_producer(queue)
    for text in texts:
        producer.send(session.create_text_message(text))


@contextmanager
def sent_and_started(vm_factory: Any, queue: Queue, *texts: str,
                     ack_mode: int = Session.AUTO_ACKNOWLEDGE
                     ) -> Iterator[tuple[Connection, Session, MessageConsumer]]:
    """A connection with one session in ``ack_mode``, ``texts`` sent to ``queue`` on it,
    then a consumer of it on the same session and the connection started: what each test
    here does before it looks at acknowledgement."""
    with vm_factory.create_connection() as conn:
        session = conn.create_session(ack_mode=ack_mode)
        send_texts(session, queue, *texts)
        consumer = session.create_consumer(queue)
        conn.start()
        yield conn, session, consumer


def test_auto_ack_consumes_on_receive(vm_factory):
    queue = Queue("auto")
    with sent_and_started(vm_factory, queue, "a", "b") as (conn, _, consumer):
        assert consumer.receive(1.0).text == "a"
        stats = conn.destination_stats(queue)
        assert (stats["messageCount"], stats["dequeued"]) == (1, 1)


def test_client_ack_acknowledges_everything_the_session_delivered(vm_factory):
    queue = Queue("client")
    with sent_and_started(vm_factory, queue, "a", "b", "c",
                          ack_mode=Session.CLIENT_ACKNOWLEDGE) as (conn, _, consumer):
        msgs = [consumer.receive(1.0) for _ in range(3)]
        assert conn.destination_stats(queue)["messageCount"] == 3
        msgs[1].acknowledge()
        assert conn.destination_stats(queue)["messageCount"] == 0


def test_recover_redelivers_unacknowledged_in_order_marked_redelivered(vm_factory):
    queue = Queue("recover")
    with sent_and_started(vm_factory, queue, "a", "b", "c", "d",
                          ack_mode=Session.CLIENT_ACKNOWLEDGE) as (conn, session, consumer):
        first = [consumer.receive(1.0) for _ in range(2)]
        assert [m.redelivered for m in first] == [False, False]
        session.recover()
        again = [consumer.receive(1.0) for _ in range(4)]
        assert [m.text for m in again] == ["a", "b", "c", "d"]
        assert [m.redelivered for m in again] == [True, True, False, False]
        assert [m.delivery_count for m in again] == [2, 2, 1, 1]
        assert again[0].get_property("JMSXDeliveryCount") == 2
        again[-1].acknowledge()
        assert conn.destination_stats(queue)["messageCount"] == 0


def test_individual_ack_acknowledges_only_that_message(vm_factory):
    queue = Queue("individual")
    with sent_and_started(vm_factory, queue, "a", "b", "c",
                          ack_mode=Session.INDIVIDUAL_ACKNOWLEDGE) as (conn, session, consumer):
        msgs = [consumer.receive(1.0) for _ in range(3)]
        msgs[1].acknowledge()
        assert conn.destination_stats(queue)["messageCount"] == 2
        session.recover()
        assert [consumer.receive(1.0).text for _ in range(2)] == ["a", "c"]


def test_dups_ok_eventually_consumes_everything(vm_factory):
    vm_factory["dupsOkBatchSize"] = 3
    queue = Queue("dups")
    with sent_and_started(vm_factory, queue, *[str(i) for i in range(10)],
                          ack_mode=Session.DUPS_OK_ACKNOWLEDGE) as (conn, _, consumer):
        got = [consumer.receive(1.0).text for _ in range(10)]
        assert got == [str(i) for i in range(10)]
        assert conn.destination_stats(queue)["messageCount"] == 0


def test_no_acknowledge_forgets_messages_once_delivered(vm_factory):
    queue = Queue("noack")
    with vm_factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.NO_ACKNOWLEDGE)
        send_texts(session, queue, "a", "b")
        consumer = session.create_consumer(queue)
        # Prefetched messages are already gone from the broker's books.
        assert conn.destination_stats(queue)["messageCount"] == 0
        conn.start()
        assert consumer.receive(1.0).text == "a"
        consumer.close()
    with vm_factory.create_connection() as conn:
        consumer = conn.create_session().create_consumer(queue)
        conn.start()
        assert consumer.receive(0.2) is None  # "b" is not redelivered: at-most-once


def test_transacted_sends_are_invisible_until_commit(vm_factory):
    queue = Queue("tx.send")
    with vm_factory.create_connection() as conn:
        tx_session = conn.create_session(transacted=True)
        probe = conn.create_session().create_browser(queue)
        conn.create_session().create_consumer(queue).close()  # creates the queue
        send_texts(tx_session, queue, "a", "b")
        assert list(probe) == []
        assert conn.destination_stats(queue)["messageCount"] == 0
        tx_session.commit()
        assert conn.destination_stats(queue)["messageCount"] == 2
        send_texts(tx_session, queue, "c")
        tx_session.rollback()
        assert conn.destination_stats(queue)["messageCount"] == 2


def test_transacted_receive_is_consumed_on_commit_and_redelivered_on_rollback(vm_factory):
    queue = Queue("tx.receive")
    with vm_factory.create_connection() as conn:
        send_texts(conn.create_session(), queue, "a", "b", "c")
        session = conn.create_session(transacted=True)
        assert session.ack_mode == Session.SESSION_TRANSACTED
        consumer = session.create_consumer(queue)
        conn.start()
        assert [consumer.receive(1.0).text for _ in range(2)] == ["a", "b"]
        session.rollback()
        again = [consumer.receive(1.0) for _ in range(3)]
        assert [m.text for m in again] == ["a", "b", "c"]
        assert [m.redelivered for m in again] == [True, True, False]
        assert conn.destination_stats(queue)["messageCount"] == 3
        session.commit()
        assert conn.destination_stats(queue)["messageCount"] == 0


def test_unacked_messages_are_redelivered_when_the_consumer_closes(vm_factory):
    queue = Queue("close.redeliver")
    with sent_and_started(vm_factory, queue, "a", "b", "c",
                          ack_mode=Session.CLIENT_ACKNOWLEDGE) as (conn, session, consumer):
        assert consumer.receive(1.0).text == "a"
        consumer.close()
        assert conn.destination_stats(queue)["deliveringCount"] == 0
        other = session.create_consumer(queue)
        msgs = [other.receive(1.0) for _ in range(3)]
        assert [(m.text, m.delivery_count) for m in msgs] == [("a", 2), ("b", 1), ("c", 1)]


def test_acknowledge_is_a_no_op_in_auto_mode(vm_factory):
    queue = Queue("auto.noop")
    with sent_and_started(vm_factory, queue, "a") as (conn, _, consumer):
        msg = consumer.receive(1.0)
        assert isinstance(msg, TextMessage)
        msg.acknowledge()
        assert conn.destination_stats(queue)["messageCount"] == 0


def test_auto_ack_over_a_network_transport_acknowledges_each_message_before_the_next(
    vm_broker,
):
    """Grouping AUTO acknowledgements is for in-process transports only: over a network
    a client crash may redeliver at most the message being handled (JMS AUTO)."""
    import threading

    from jmspy import ConnectionFactory
    from jmspy.transport import register_transport
    from jmspy.transports.vm import VmTransport

    class NetworkLikeVm(VmTransport):
        in_process = False

    register_transport("vmnet", lambda url, props: NetworkLikeVm(url, props))
    queue = Queue("auto.network")
    seen: list[int] = []
    done = threading.Event()

    def listener(msg):
        seen.append(vm_broker.stats("auto.network")["dequeued"])
        if len(seen) == 6:
            done.set()

    with ConnectionFactory(f"vmnet://{vm_broker.name}").create_connection() as conn:
        session = conn.create_session()
        send_texts(session, queue, *"abcdef")
        session.create_consumer(queue).set_message_listener(listener)
        conn.start()
        assert done.wait(2.0)
    assert seen == [0, 1, 2, 3, 4, 5]
