"""One owner of the consumer flow window, on each side of ``stomp://``.

Client side: each consumer's flow accounting (its prefetch buffer) decides every credit;
a transport whose broker pushes beyond it keeps the surplus in a stash and asks the
accounting (``TransportListener.credit``) how much of it may go. Broker side: the STOMP
session decides when its core consumer gets credit, but the credit granted and not yet
used is counted by the core alone (``ServerConnection.credit``).

Each test here fails if a second owner counts on its own: a transport that adds up the
``credits`` of ``grant_credit`` hands over what the accounting never granted, and a
session that keeps its own copy of the core's credit starves once the two disagree.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from polling import wait_until
from scripted_stomp import ScriptedBroker
from stomp_pair import StompPair
from tcp_relay import Relay
from window_owner import HandOvers, record_hand_overs

from jmspy import Connection, ConnectionFactory, Session

WAIT = 10.0


@pytest.fixture
def hand_overs(monkeypatch: pytest.MonkeyPatch) -> HandOvers:
    return record_hand_overs(monkeypatch)


@contextmanager
def scripted(count: int) -> Iterator[ScriptedBroker]:
    """A broker that ignores every window: it pushes ``count`` MESSAGEs at once."""
    broker = ScriptedBroker()

    def script(b: ScriptedBroker) -> None:
        for i in range(count):
            b.write(b.message(f"m{i}".encode(), i, [("content-type", "text/plain")]))

    broker.script = script
    try:
        yield broker
    finally:
        broker.close()


def test_the_transport_hands_over_what_the_accounting_granted_not_what_it_was_told(
    hand_overs: HandOvers,
) -> None:
    with scripted(12) as broker:
        factory = ConnectionFactory(broker.url, imqConsumerFlowLimit=4,
                                    imqConsumerFlowThreshold=50)
        conn = factory.create_connection()
        try:
            session = conn.create_session()
            consumer = session.create_consumer(session.create_queue("q"))
            transport: Any = conn._transport
            cid = consumer.consumer_id
            conn.start()
            assert wait_until(lambda: transport.consumer_state(cid)["stashed"] == 8, WAIT)
            assert consumer.flow_stats().delivered == 4  # the first window, no more
            # A grant the accounting never made: a transport that counted the credits it
            # was given would now hand 3 stashed messages over; the window says none.
            transport.grant_credit(cid, 3)
            assert (consumer.flow_stats().delivered,
                    transport.consumer_state(cid)["stashed"]) == (4, 8)
            texts = []
            for _ in range(12):
                message = consumer.receive(WAIT)
                assert message is not None
                texts.append(message.text)
            stats = consumer.flow_stats()
        finally:
            conn.close()
    assert texts == [f"m{i}" for i in range(12)]
    # 4, then 2 each time unconsumed fell to 50 % of 4: one top-up per two consumed
    assert (stats.delivered, stats.batches_requested) == (12, 7)
    assert len(hand_overs.credit_before) == 12
    assert hand_overs.over_credit() == []


def test_a_revoked_window_hands_nothing_over_until_the_accounting_grants_again(
    hand_overs: HandOvers,
) -> None:
    """Pull mode (limit 0): a receive that times out takes its one credit back; what the
    broker pushed meanwhile stays stashed until the next receive grants one again."""
    with scripted(3) as broker:
        conn = ConnectionFactory(broker.url, imqConsumerFlowLimit=0).create_connection()
        try:
            session = conn.create_session()
            consumer = session.create_consumer(session.create_queue("q"))
            transport: Any = conn._transport
            cid = consumer.consumer_id
            conn.start()
            assert wait_until(lambda: transport.consumer_state(cid)["stashed"] == 3, WAIT)
            got = [consumer.receive(WAIT) for _ in range(3)]
            assert [m.text if m else None for m in got] == ["m0", "m1", "m2"]
            assert consumer.flow_stats().outstanding_credit in (0, 1)
        finally:
            conn.close()
    assert hand_overs.over_credit() == []
    assert len(hand_overs.credit_before) == 3


def _four_sent_three_seen_recovered(conn: Connection, name: str) -> tuple[Any, Any, list[str]]:
    """t0..t3 sent to queue ``name``; a CLIENT_ACKNOWLEDGE consumer received three of
    them, then the session recovered: (session, consumer, the three texts seen)."""
    session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
    queue = session.create_queue(name)
    producer = session.create_producer(queue)
    for i in range(4):
        producer.send(session.create_text_message(f"t{i}"))
    consumer = session.create_consumer(queue)
    conn.start()
    seen = _receive_texts(consumer, 3)
    session.recover()
    return session, consumer, seen


def _receive_texts(consumer: Any, n: int) -> list[str]:
    out = []
    for _ in range(n):
        message = consumer.receive(WAIT)
        assert message is not None, f"only {len(out)} of {n} arrived"
        out.append(message.text)
    return out


def test_one_window_over_thresholds_recover_and_a_reconnect(
    server: Any, hand_overs: HandOvers,
) -> None:
    """The jmspy broker runs the same window on its side; the client's accounting stays
    the one that decides what the consumer sees, across every way credit changes: top-ups
    at the threshold, a recover (credit taken back, messages handed back, credit given
    again) and a dropped connection (every credit dead, a whole window granted anew)."""
    relay = Relay((server.host, server.port))
    factory = ConnectionFactory(f"stomp://127.0.0.1:{relay.port}", imqConsumerFlowLimit=5,
                                imqConsumerFlowThreshold=40, imqReconnectEnabled=True,
                                imqReconnectInterval=50)
    conn: Connection = factory.create_connection()
    try:
        session, consumer, seen = _four_sent_three_seen_recovered(conn, "flow.owner")
        # the same three again (in which order: the test below)
        assert sorted(_receive_texts(consumer, 3)) == seen == ["t0", "t1", "t2"]
        last = consumer.receive(WAIT)
        assert last is not None and last.text == "t3"
        last.acknowledge()  # t0..t3 consumed
        producer = session.create_producer(session.create_queue("flow.owner"))
        for i in range(4, 30):
            producer.send(session.create_text_message(f"t{i}"))
        # the broker has the ACK before the drop (else it redelivers t0..t3 after it)
        assert wait_until(lambda: server.stats("flow.owner")["messageCount"] == 26, WAIT)

        drops = conn.drops
        assert relay.sever() >= 1
        assert wait_until(lambda: conn.drops > drops, WAIT)
        rest = []
        while len(rest) < 26:
            message = consumer.receive(WAIT)
            assert message is not None, f"only {len(rest)} of 26 arrived after the drop"
            rest.append(message.text)
            message.acknowledge()
        assert rest == [f"t{i}" for i in range(4, 30)]
        stats = consumer.flow_stats()
        assert stats.unconsumed + stats.outstanding_credit <= stats.limit
    finally:
        conn.close()
        relay.close()
    assert hand_overs.over_credit() == []


def test_the_stomp_session_reads_the_cores_credit_instead_of_keeping_its_own() -> None:
    """Take the core consumer's credit away behind the session's back: a session with its
    own count of it would still believe the window full and never grant again."""
    pair = StompPair()
    producer, consumer = pair.client(), pair.client()
    producer.send("/queue/w", *[f"m{i}" for i in range(12)])
    consumer.subscribe("/queue/w", "s", ack="client-individual",
                       **{"jmspy-flow-limit": "10", "jmspy-flow-threshold": "50"})
    assert consumer.bodies() == [f"m{i}" for i in range(10)]
    session: Any = consumer.session
    sub = session._subs["s"]
    core = session._conn
    assert core.credit(sub.consumer_id) == 0
    # five acks: unconsumed 5 = 50 % of 10, so the session tops up to 10 again
    for message in list(consumer.messages[:5]):
        consumer.ack(message)
    assert consumer.bodies()[10:] == ["m10", "m11"]
    assert core.credit(sub.consumer_id) == 3  # 5 granted, 2 used: the core's one count
    assert core.revoke_credit(sub.consumer_id) == 3  # now it holds none
    producer.send("/queue/w", "m12")
    assert len(consumer.messages) == 12  # no credit: nothing more comes
    consumer.ack(consumer.messages[5])  # unconsumed 6 + credit 0 > 50 %: no top-up yet
    assert len(consumer.messages) == 12
    # unconsumed 5 + credit 0 = 50 %: top up by 5, which delivers m12 at once (a session
    # still counting the 3 it granted would see 8 and wait)
    consumer.ack(consumer.messages[6])
    assert consumer.bodies()[12:] == ["m12"]
    assert core.credit(sub.consumer_id) == 4


def test_a_recover_with_a_small_window_redelivers_in_order(server: Any) -> None:
    """The client's NACKs go as one batch (jmspy-nack-more), which the broker returns in
    one step: acted on one by one, each lands in front of the last, or the window refills
    between them and redelivers out of order."""
    factory = ConnectionFactory(f"stomp://{server.host}:{server.port}",
                                imqConsumerFlowLimit=5, imqConsumerFlowThreshold=40)
    with factory.create_connection() as conn:
        _, consumer, seen = _four_sent_three_seen_recovered(conn, "flow.recover")
        assert _receive_texts(consumer, 3) == seen
