"""``Session.lend_messages`` over ``stomp://`` to the bundled broker lends in runs: one ACK
per stretch of a subscription's deliveries that are all lent (``jmspy-lease-from``), so a
gap (a message kept, not lent) splits the run and stays the consumer's."""

from __future__ import annotations

from typing import Any

from jmspy import ConnectionFactory, Queue, Session


def test_lending_around_a_kept_message_lends_the_others_and_keeps_it(server: Any) -> None:
    factory = ConnectionFactory(f"stomp://{server.host}:{server.port}")
    with factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(Queue("runs"))
        for i in range(6):
            producer.send(session.create_text_message(str(i)))
        reader = conn.create_session(ack_mode=Session.INDIVIDUAL_ACKNOWLEDGE)
        consumer = reader.create_consumer(Queue("runs"))
        conn.start()
        got = [consumer.receive(5) for _ in range(6)]
        messages = [m for m in got if m is not None]
        assert [m.text for m in messages] == [str(i) for i in range(6)]
        kept = messages[2]
        reader.lend_messages([m for m in messages if m is not kept], "runs:0:0")
        assert server.stats("runs")["deliveringCount"] == 6  # 5 lent, 1 still the reader's
        kept.acknowledge()
    with factory.create_connection() as driver:
        assert driver.settle_leases(["runs:0:0"]) == 5
    stats = server.stats("runs")
    assert (stats["messageCount"], stats["deliveringCount"]) == (0, 0)
