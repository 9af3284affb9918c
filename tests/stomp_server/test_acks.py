"""Ack modes, NACK, transactions, receipts — unmodified stomp.py 1.1 and 1.2 clients."""

from __future__ import annotations

import time

import pytest
from stomp_support import ServerHandle


def _fill(conn, dest: str, n: int) -> None:
    for i in range(n):
        conn.send(dest, f"m{i}")
    conn.send(dest, "end", receipt="filled")


def _ack_ids(version: str, headers: dict[str, str]) -> tuple[str, ...]:
    """What ACK/NACK names a message by: STOMP 1.2 its ``ack`` header, 1.1 its
    ``message-id`` and the subscription (``s`` in every test here)."""
    return (headers["ack"],) if version == "1.2" else (headers["message-id"], "s")


def _sent_then_received(conn, lst, dest: str, n: int, ack: str) -> list:
    """Send ``m0`` .. ``m{n-1}`` to ``dest``, then subscribe (id ``s``, the given ack mode)
    and wait for all ``n`` to arrive; the messages received."""
    for i in range(n):
        conn.send(dest, f"m{i}")
    conn.subscribe(dest, id="s", ack=ack)
    return lst.wait_messages(n)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_client_ack_is_cumulative(server: ServerHandle, connect, version: str) -> None:
    conn, lst = connect(version)
    msgs = _sent_then_received(conn, lst, "/queue/cum", 5, "client")
    server.wait_stats("cum", "deliveringCount", 5)
    third = msgs[2].headers
    conn.ack(*_ack_ids(version, third))
    server.wait_stats("cum", "deliveringCount", 2)
    server.wait_stats("cum", "messageCount", 2)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_client_individual_acks_one(server: ServerHandle, connect, version: str) -> None:
    conn, lst = connect(version)
    msgs = _sent_then_received(conn, lst, "/queue/ind", 3, "client-individual")
    h = msgs[1].headers
    conn.ack(*_ack_ids(version, h))
    server.wait_stats("ind", "messageCount", 2)
    assert server.stats("ind")["deliveringCount"] == 2


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_nack_redelivers_with_redelivered_true(server: ServerHandle, connect, version) -> None:
    conn, lst = connect(version)
    conn.send("/queue/nack", "again")
    conn.subscribe("/queue/nack", id="s", ack="client-individual")
    first = lst.wait_messages(1)[0]
    # a first delivery says redelivered:false (as RabbitMQ does), without a count
    assert first.headers["redelivered"] == "false"
    assert "jmspy-delivery-count" not in first.headers
    conn.nack(*_ack_ids(version, first.headers))
    second = lst.wait_messages(2)[1]
    assert second.body == "again"
    assert second.headers["redelivered"] == "true"
    assert second.headers["jmspy-delivery-count"] == "2"


def test_transaction_commit_and_abort(server: ServerHandle, connect) -> None:
    conn, lst = connect("1.2")
    tx = conn.begin()
    conn.send("/queue/tx", "kept", transaction=tx)
    conn.send("/queue/probe", "x", receipt="r0")
    lst.wait_receipt("r0")
    assert "tx" not in server.call(server.broker.queue_names)  # staged, not routed
    conn.commit(tx)
    tx2 = conn.begin()
    conn.send("/queue/tx", "dropped", transaction=tx2)
    conn.abort(tx2)
    conn.send("/queue/probe", "x", receipt="r1")
    lst.wait_receipt("r1")
    assert server.stats("tx")["messageCount"] == 1
    # a transacted ack, aborted: the message comes back redelivered
    conn.subscribe("/queue/tx", id="s", ack="client-individual")
    m = lst.wait_messages(1)[0]
    tx3 = conn.begin()
    conn.ack(m.headers["ack"], transaction=tx3)
    conn.abort(tx3)
    again = lst.wait_messages(2)[1]
    assert again.body == "kept" and again.headers["redelivered"] == "true"
    tx4 = conn.begin()
    conn.ack(again.headers["ack"], transaction=tx4)
    conn.commit(tx4, receipt="r2")
    lst.wait_receipt("r2")
    assert server.stats("tx")["messageCount"] == 0


def test_transaction_aborted_on_disconnect(server: ServerHandle, connect) -> None:
    conn, _lst = connect("1.1")
    tx = conn.begin()
    conn.send("/queue/txd", "never", transaction=tx)
    conn.disconnect()
    conn2, lst2 = connect("1.2")
    conn2.send("/queue/txd", "only", receipt="r")
    lst2.wait_receipt("r")
    assert server.stats("txd")["messageCount"] == 1


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_receipts_for_every_frame(server: ServerHandle, connect, version: str) -> None:
    conn, lst = connect(version)
    conn.send("/queue/rc", "x", receipt="send")
    conn.subscribe("/queue/rc", id="s", ack="client", receipt="sub")
    m = lst.wait_messages(1)[0]
    tx = conn.begin()
    conn.ack(*_ack_ids(version, m.headers), transaction=tx, receipt="ack")
    conn.commit(tx, receipt="commit")
    conn.unsubscribe("s", receipt="unsub")
    for rid in ("send", "sub", "ack", "commit", "unsub"):
        lst.wait_receipt(rid)
    conn.disconnect(receipt="bye")
    # stomp.py may return from disconnect() before its receiver thread has handed the
    # RECEIPT to listeners: wait for it like the others.
    lst.wait_receipt("bye")


def test_prefetch_size_limits_in_flight(server: ServerHandle, connect) -> None:
    conn, lst = connect("1.2")
    _fill(conn, "/queue/pf", 50)
    lst.wait_receipt("filled")
    conn.subscribe("/queue/pf", id="s", ack="client-individual",
                   headers={"activemq.prefetchSize": "10"})
    msgs = lst.wait_messages(10)
    server.wait_stats("pf", "deliveringCount", 10)
    time.sleep(0.05)
    assert len(lst.messages) == 10
    conn.ack(msgs[0].headers["ack"])
    lst.wait_messages(11)
    server.wait_stats("pf", "deliveringCount", 10)


def test_flow_limit_threshold_batches_like_seed_004(server: ServerHandle, connect) -> None:
    conn, lst = connect("1.2")
    _fill(conn, "/queue/flow", 2999)
    lst.wait_receipt("filled")
    conn.subscribe("/queue/flow", id="s", ack="client-individual",
                   headers={"jmspy-flow-limit": "1000", "jmspy-flow-threshold": "50"})
    msgs = lst.wait_messages(1000)
    server.wait_stats("flow", "deliveringCount", 1000)
    for m in msgs[:499]:
        conn.ack(m.headers["ack"])
    conn.send("/queue/probe", "x", receipt="r499")
    lst.wait_receipt("r499")
    assert server.stats("flow")["deliveringCount"] == 501
    assert len(lst.messages) == 1000
    conn.ack(msgs[499].headers["ack"])
    server.wait_stats("flow", "deliveringCount", 1000)
    lst.wait_messages(1500)


def test_destination_consumer_flow_limit_lower_wins(server_factory, connect) -> None:
    from jmspy.broker_ref.core import AddressSettings

    h = server_factory(settings={"limited.#": AddressSettings(consumer_flow_limit=5)})
    conn, lst = connect("1.2", handle=h)
    _fill(conn, "/queue/limited.q", 20)
    lst.wait_receipt("filled")
    conn.subscribe("/queue/limited.q", id="s", ack="client-individual",
                   headers={"jmspy-flow-limit": "100"})
    lst.wait_messages(5)
    h.wait_stats("limited.q", "deliveringCount", 5)
    time.sleep(0.05)
    assert len(lst.messages) == 5


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_only_subscriptions_that_acknowledge_get_an_ack_header(
        server: ServerHandle, connect, version: str) -> None:
    """STOMP 1.2's client modes carry an ``ack`` header on every MESSAGE; ``ack:auto``
    deliveries (nothing answers them) and STOMP 1.1 (ACK names the message-id) carry none,
    as ActiveMQ 5 and RabbitMQ send none there."""
    conn, lst = connect(version)
    for i, mode in enumerate(("auto", "client", "client-individual")):
        conn.send(f"/queue/ackhdr{i}", mode)
        conn.subscribe(f"/queue/ackhdr{i}", id=f"s{i}", ack=mode)
    got = {m.body if isinstance(m.body, str) else m.body.decode(): m.headers
           for m in lst.wait_messages(3)}
    assert "ack" not in got["auto"]
    for mode in ("client", "client-individual"):
        assert ("ack" in got[mode]) == (version == "1.2")
