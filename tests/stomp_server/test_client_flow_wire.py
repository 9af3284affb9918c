"""The jmspy stomp:// client's connection flow limit, as the bundled broker enforces it:
``imqConnectionFlowLimit`` travels in CONNECT, so the broker itself holds back (not only
the client's stash), which is what makes the capability cell native."""

from __future__ import annotations

import time
from typing import Any

from capability_probes import started_with_four_each

from jmspy import ConnectionFactory


def _delivering(server: Any, names: list[str]) -> int:
    return sum(server.stats(n)["deliveringCount"] for n in names)


def test_connection_flow_limit_is_enforced_by_the_broker_across_consumers(server: Any) -> None:
    factory = ConnectionFactory(f"stomp://{server.host}:{server.port}",
                                imqConnectionFlowLimitEnabled=True, imqConnectionFlowLimit=3,
                                imqConsumerFlowLimit=10)
    names = ["cf.a", "cf.b"]
    with factory.create_connection() as conn:
        s = conn.create_session()
        queues = [s.create_queue(n) for n in names]
        consumers = started_with_four_each(conn, s, queues)
        deadline = time.monotonic() + 10
        while _delivering(server, names) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)  # waits for the broker to push what the cap allows
        # each consumer's own window (10) would take all 8; the broker stops at 3
        assert _delivering(server, names) == 3
        assert sum(server.stats(n)["messageCount"] for n in names) == 8
        got = {q.name: [] for q in queues}
        while sum(map(len, got.values())) < 8 and time.monotonic() < deadline + 10:
            for q, c in zip(queues, consumers, strict=True):
                m = c.receive(0.05)
                if m is not None:
                    got[q.name].append(m.text)
                    assert _delivering(server, names) <= 3
        assert got == {q.name: [f"{q.name}-{i}" for i in range(4)] for q in queues}


def test_the_client_leaves_the_connection_cap_to_the_broker_that_enforces_it(
    server_factory: Any,
) -> None:
    """Two owners of one cap could share it out differently: here the broker knows qa's
    consumerFlowLimit (1) and gives qb the other two slots, while a client-side cap, not
    knowing it, would have given qa all three and left qb's messages in its stash."""
    from jmspy.broker_ref.core import AddressSettings

    server = server_factory(settings={"cf.a": AddressSettings(consumer_flow_limit=1)})
    factory = ConnectionFactory(f"stomp://{server.host}:{server.port}",
                                imqConnectionFlowLimitEnabled=True, imqConnectionFlowLimit=3,
                                imqConsumerFlowLimit=10)
    with factory.create_connection() as conn:
        s = conn.create_session()
        qa, qb = s.create_queue("cf.a"), s.create_queue("cf.b")
        s.create_consumer(qa)
        cb = s.create_consumer(qb)
        conn.start()
        producer = s.create_producer()
        producer.send(s.create_text_message("a0"), qa)
        for i in range(2):
            producer.send(s.create_text_message(f"b{i}"), qb)
        got = [cb.receive(10), cb.receive(10)]
        assert [m.text if m else None for m in got] == ["b0", "b1"]


def test_a_destinations_lower_flow_limit_is_reported_over_stomp_as_the_destinations(
    server_factory: Any,
) -> None:
    """The broker sends the destination's consumerFlowLimit on the SUBSCRIBE's RECEIPT:
    ``flow_stats()`` then says the destination set the window, as over ``vm://``."""
    from jmspy.broker_ref.core import AddressSettings

    server = server_factory(settings={"fl.low": AddressSettings(consumer_flow_limit=7)})
    factory = ConnectionFactory(f"stomp://{server.host}:{server.port}",
                                imqConsumerFlowLimit=100)
    with factory.create_connection() as conn:
        s = conn.create_session()
        low = s.create_consumer(s.create_queue("fl.low")).flow_stats()
        plain = s.create_consumer(s.create_queue("fl.plain")).flow_stats()
    assert (low.limit, low.limited_by, low.destination_limit, low.client_limit) == (
        7, "destination", 7, 100)
    assert (plain.limit, plain.limited_by, plain.destination_limit) == (100, "client", None)


def test_a_destination_limit_above_the_clients_leaves_the_client_setting_the_window(
    server_factory: Any,
) -> None:
    from jmspy.broker_ref.core import AddressSettings

    server = server_factory(settings={"fl.high": AddressSettings(consumer_flow_limit=500)})
    factory = ConnectionFactory(f"stomp://{server.host}:{server.port}",
                                imqConsumerFlowLimit=20)
    with factory.create_connection() as conn:
        s = conn.create_session()
        stats = s.create_consumer(s.create_queue("fl.high")).flow_stats()
    assert (stats.limit, stats.limited_by, stats.destination_limit) == (20, "client", 500)
