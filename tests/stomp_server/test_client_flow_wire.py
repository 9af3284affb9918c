"""The jmspy stomp:// client's connection flow limit, as the bundled broker enforces it:
``imqConnectionFlowLimit`` travels in CONNECT, so the broker itself holds back (not only
the client's stash), which is what makes the capability cell native."""

from __future__ import annotations

import time
from typing import Any

import pytest
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


@pytest.mark.parametrize(("destination_limit", "client_limit", "expected"), [
    (7, 100, (7, "destination", 7, 100)),  # the destination's is lower: it sets the window
    (500, 20, (20, "client", 500, 20)),  # the client's is lower: reported, not applied
])
def test_the_destinations_flow_limit_travels_on_the_subscribes_receipt_over_stomp(
    server_factory: Any, destination_limit: int, client_limit: int,
    expected: tuple[int, str, int, int],
) -> None:
    """The broker sends the destination's consumerFlowLimit on the SUBSCRIBE's RECEIPT:
    ``flow_stats()`` then says which side set the window, as over ``vm://``. A
    destination without a limit of its own leaves the client's."""
    from jmspy.broker_ref.core import AddressSettings

    settings = {"fl.limited": AddressSettings(consumer_flow_limit=destination_limit)}
    server = server_factory(settings=settings)
    factory = ConnectionFactory(f"stomp://{server.host}:{server.port}",
                                imqConsumerFlowLimit=client_limit)
    with factory.create_connection() as conn:
        s = conn.create_session()
        limited = s.create_consumer(s.create_queue("fl.limited")).flow_stats()
        plain = s.create_consumer(s.create_queue("fl.plain")).flow_stats()
    assert (limited.limit, limited.limited_by, limited.destination_limit,
            limited.client_limit) == expected
    assert (plain.limit, plain.limited_by, plain.destination_limit) == (
        client_limit, "client", None)
