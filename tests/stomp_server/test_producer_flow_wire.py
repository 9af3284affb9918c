"""Producer flow control over STOMP (seed 003) against ``jmspy broker``: the broker
withholds a held SEND's RECEIPT until consumers free space (none lost), stops reading a
client only when it keeps sending without receipts, answers ``send-fail-if-no-space``
with an ERROR whose ``message`` names the limit; the jmspy ``stomp://`` producer blocks,
honours ``sendTimeout`` with ResourceAllocationException, and a connection that consumes
what it produces keeps moving."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import stomp
from flow_support import loop_one_connection, until
from stomp_support import Collector, ServerHandle

from jmspy import ConnectionFactory, DeliveryMode, Queue, ResourceAllocationException
from jmspy.broker_ref.core.api import AddressSettings
from jmspy.broker_ref.protocols.stomp.protocol import HELD_FRAMES_READ_LIMIT
from jmspy.broker_ref.protocols.stomp.read_pauses import Pause

NP = DeliveryMode.NON_PERSISTENT
BODY = "x" * 1024


def blocked(h: ServerHandle, queue: str) -> int:
    """Producers the broker holds for ``queue`` (0 before it exists)."""
    return int(h.call(lambda: h.broker.stats(queue).blocked_producers
                      if queue in h.broker.queues else 0))


def count(h: ServerHandle, queue: str) -> int:
    return int(h.call(lambda: h.broker.stats(queue).message_count))


def test_a_held_send_gets_its_receipt_only_once_a_consumer_frees_space(
        server_factory: Callable[..., ServerHandle],
        raw: Callable[[ServerHandle], tuple[Any, Collector]]) -> None:
    h = server_factory(memory_limit=64 * 1024)
    prod, heard = raw(h)
    sent = 0
    while True:  # one receipted send at a time, as a synchronous producer does
        prod.send("/queue/q", BODY, headers={"receipt": f"s{sent}", "persistent": "false"})
        sent += 1
        try:
            heard.wait_receipt(f"s{sent - 1}", timeout=0.5)
        except AssertionError:
            break  # its receipt is withheld: the producer waits
        assert sent < 1000
    until(lambda: blocked(h, "q") == 1, "the broker to report the blocked producer")
    assert count(h, "q") == sent - 1  # the held send is not stored
    assert not heard.errors
    cons, got = raw(h)
    cons.subscribe("/queue/q", id="1", ack="auto")
    heard.wait_receipt(f"s{sent - 1}", timeout=30)
    got.wait_messages(sent, timeout=30)
    assert [m.body for m in got.messages] == [BODY] * sent


def test_a_flood_without_receipts_stops_being_read_then_every_message_arrives(
        server_factory: Callable[..., ServerHandle],
        raw: Callable[[ServerHandle], tuple[Any, Collector]]) -> None:
    h = server_factory(memory_limit=64 * 1024)
    n = HELD_FRAMES_READ_LIMIT + 2000
    prod, _ = raw(h)
    done = threading.Event()

    def flood() -> None:
        for i in range(n):
            prod.send("/queue/q", f"{i}", headers={"persistent": "false"})
        done.set()

    t = threading.Thread(target=flood, daemon=True)
    t.start()

    def paused() -> bool:
        conns = h.call(lambda: list(h.server.connections) if h.server else [])
        return any(c.pauses.paused(Pause.PRODUCER_FLOW) for c in conns)

    until(paused, "the broker to stop reading the flooding client")
    held = h.call(lambda: [c.session.held_sends for c in h.server.connections])  # type: ignore[union-attr]
    assert max(held) >= HELD_FRAMES_READ_LIMIT and count(h, "q") < n
    cons, got = raw(h)
    cons.subscribe("/queue/q", id="1", ack="auto")
    got.wait_messages(n, timeout=60)
    assert [int(m.body) for m in got.messages] == list(range(n))  # none lost, in order
    assert done.wait(30)


def test_send_fail_if_no_space_answers_raw_stomp_with_an_error_naming_the_limit(
        server_factory: Callable[..., ServerHandle],
        raw: Callable[[ServerHandle], tuple[Any, Collector]]) -> None:
    h = server_factory(memory_limit=64 * 1024, send_fail_if_no_space=True)
    prod, heard = raw(h)
    for i in range(200):
        try:
            prod.send("/queue/q", BODY, headers={"receipt": f"s{i}", "persistent": "false"})
        except (OSError, stomp.exception.NotConnectedException):
            break  # the broker closed the connection after its ERROR
        if heard.errors:
            break
    until(lambda: bool(heard.errors), "the ERROR frame")
    error = heard.errors[0]
    assert "memory-limit" in error.headers["message"]
    assert "queue 'q'" in error.headers["message"]
    assert "send-fail-if-no-space" in error.body
    assert count(h, "q") == int(error.headers["receipt-id"][1:])  # the refused one: not stored


def test_a_destination_memory_limit_holds_its_producer_while_others_send(
        server_factory: Callable[..., ServerHandle],
        raw: Callable[[ServerHandle], tuple[Any, Collector]]) -> None:
    h = server_factory(settings={"slow.#": AddressSettings(memory_limit=16 * 1024)})
    a, heard_a = raw(h)
    for i in range(40):
        a.send("/queue/slow.q", BODY, headers={"receipt": f"a{i}", "persistent": "false"})
    b, heard_b = raw(h)
    for i in range(40):
        b.send("/queue/fast", BODY, headers={"receipt": f"b{i}", "persistent": "false"})
    heard_b.wait_receipt("b39", timeout=10)
    assert "a39" not in heard_a.receipts and blocked(h, "slow.q") == 1


def test_a_disconnect_waits_for_the_held_sends_before_its_receipt(
        server_factory: Callable[..., ServerHandle],
        raw: Callable[[ServerHandle], tuple[Any, Collector]]) -> None:
    h = server_factory(memory_limit=32 * 1024)
    prod, heard = raw(h)
    for i in range(50):
        prod.send("/queue/q", f"{i}", headers={"persistent": "false"})
        prod.send("/queue/q", BODY, headers={"persistent": "false"})
    prod.send_frame("DISCONNECT", {"receipt": "bye"})
    until(lambda: blocked(h, "q") == 1, "the sends to be held")
    assert "bye" not in heard.receipts
    cons, got = raw(h)
    cons.subscribe("/queue/q", id="1", ack="auto")
    heard.wait_receipt("bye", timeout=30)
    got.wait_messages(100, timeout=30)


@pytest.mark.parametrize("ending", ["DISCONNECT, then close", "close"])
def test_sends_held_when_their_client_closes_are_delivered_once_there_is_room(
        server_factory: Callable[..., ServerHandle],
        raw: Callable[[ServerHandle], tuple[Any, Collector]], ending: str) -> None:
    # stomp.py's disconnect() does not wait for the DISCONNECT's RECEIPT: a producer that
    # exits right after it closes with its last SENDs held; the broker had every byte of
    # them, so none is lost (ActiveMQ and RabbitMQ act on all a blocked producer wrote)
    h = server_factory(memory_limit=32 * 1024)
    frames = b"".join(
        f"SEND\ndestination:/queue/q\npersistent:false\n\n{i}:{BODY}\0".encode()
        for i in range(100))
    with socket.create_connection((h.host, h.port)) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
        assert sock.recv(4096).startswith(b"CONNECTED")
        sock.sendall(frames + (b"DISCONNECT\nreceipt:bye\n\n\0"
                               if ending.startswith("DISCONNECT") else b""))
        until(lambda: blocked(h, "q") == 1, "the sends to be held")
    until(lambda: h.call(lambda: len(h.server.connections)) == 0, "the close to be seen")
    cons, got = raw(h)
    cons.subscribe("/queue/q", id="1", ack="auto")
    got.wait_messages(100, timeout=30)
    assert [int(m.body.split(":")[0]) for m in got.messages] == list(range(100))
    assert blocked(h, "q") == 0


@pytest.fixture
def jms(server_factory: Callable[..., ServerHandle]) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def make(h: ServerHandle, **props: Any) -> Any:
        conn = ConnectionFactory(f"stomp://{h.host}:{h.port}", **props).create_connection()
        made.append(conn)
        return conn

    yield make
    for conn in made:
        try:
            conn.close()
        except Exception:
            pass  # already failed in the test


def test_jmspy_stomp_connection_producing_to_a_full_queue_and_consuming_it_keeps_moving(
        server_factory: Callable[..., ServerHandle], jms: Callable[..., Any],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "jmspy.broker.flow")
    h = server_factory(memory_limit=256 * 1024)
    n = 4000  # ~5 MB through a 256 KB limit, on one connection
    loop = loop_one_connection(jms(h), n, BODY, lambda: blocked(h, "loop") == 1, 60)
    got = loop.got
    assert loop.arrived, f"{len(got)} of {n} arrived"
    assert got == list(range(n))
    assert "stopping producer" in caplog.text  # the limit was reached on the way
    for i in range(200):  # persistent sends too (each waits for its receipt)
        loop.producer.send(loop.session.create_text_message(f"{n + i}:{BODY}"))
    until(lambda: len(got) == n + 200, "the persistent ones")


def test_jmspy_stomp_send_timeout_raises_resource_allocation_naming_destination_and_limit(
        server_factory: Callable[..., ServerHandle], jms: Callable[..., Any]) -> None:
    h = server_factory(memory_limit=64 * 1024)
    conn = jms(h, sendTimeout=300)
    session = conn.create_session()
    producer = session.create_producer(Queue("orders"))
    sent = 0
    with pytest.raises(ResourceAllocationException) as err:
        for _ in range(10_000):
            producer.send(session.create_text_message(BODY))  # persistent: one receipt each
            sent += 1
    text = str(err.value)
    assert "queue 'orders'" in text and "memory-limit" in text, text
    assert count(h, "orders") == sent  # the refused one was not stored


def test_jmspy_stomp_non_persistent_producer_blocks_at_the_limit_and_resumes(
        server_factory: Callable[..., ServerHandle], jms: Callable[..., Any]) -> None:
    h = server_factory(memory_limit=1024 * 1024)
    n = 3000  # ~4 MB
    sent = [0]

    def produce() -> None:
        conn = jms(h)
        session = conn.create_session()
        producer = session.create_producer(Queue("np"))
        for i in range(n):
            producer.send(session.create_text_message(f"{i}:{BODY}"), delivery_mode=NP)
            sent[0] += 1

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    until(lambda: blocked(h, "np") == 1, "the producer to be held")
    assert t.is_alive() and sent[0] < n
    conn = jms(h)
    consumer = conn.create_session().create_consumer(Queue("np"))
    conn.start()
    got = []
    for _ in range(n):
        m = consumer.receive(30.0)
        assert m is not None, f"{len(got)} of {n}"
        got.append(int(m.text.split(":")[0]))
    assert got == list(range(n))
    t.join(30)
    assert not t.is_alive() and sent[0] == n


def test_jmspy_stomp_send_fail_if_no_space_raises_then_reconnects_and_says_so(
        server_factory: Callable[..., ServerHandle], jms: Callable[..., Any]) -> None:
    h = server_factory(memory_limit=64 * 1024, send_fail_if_no_space=True)
    conn = jms(h)  # imqReconnectEnabled is off: reconnecting here is not a failover
    heard: list[Any] = []
    conn.set_exception_listener(heard.append)
    session = conn.create_session()
    producer = session.create_producer(Queue("q"))
    sent = 0
    with pytest.raises(ResourceAllocationException, match="send-fail-if-no-space"):
        for _ in range(10_000):
            producer.send(session.create_text_message(BODY))
            sent += 1
    assert count(h, "q") == sent  # nothing half-stored
    codes = lambda: [e.error_code for e in heard]  # noqa: E731
    until(lambda: "CONNECTION_RESUMED" in codes(), "the reconnect to be reported")
    [interrupted] = [e for e in heard if e.error_code == "CONNECTION_INTERRUPTED"]
    assert "refused a send for lack of space" in str(interrupted)
    assert "CONNECTION_LOST" not in codes()
    consumer = session.create_consumer(Queue("q"))
    conn.start()
    for _ in range(sent):
        assert consumer.receive(10.0) is not None
    producer.send(session.create_text_message("after"))  # the connection is usable
    m = consumer.receive(10.0)
    assert m is not None and m.text == "after"
