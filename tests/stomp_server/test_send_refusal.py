"""Issue 11 point 12 against ``jmspy broker``: a refused persistent send raises from
``send()`` (JMSSecurityException for permissions, ResourceAllocationException for limits),
a permitted one returns once the broker has the message (its RECEIPT), and with a
``persistentSendWindow`` > 1 the refusal is raised by the next send, commit or close. The
exception listener still hears of the loss (the broker closes after its ERROR)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from stomp_support import ServerHandle, orders_policy

from jmspy import ConnectionFactory, DeliveryMode, JMSException
from jmspy.errors import (
    JMSSecurityException,
    ResourceAllocationException,
    TransactionRolledBackException,
)
from jmspy.stomp_frames import CodecLimits

SECRET = "s3cret-Pa55-refusal"
AUDIT = "audit-Pa55-refusal"


@pytest.fixture
def secure(server_factory: Callable[..., ServerHandle]) -> ServerHandle:
    return server_factory(security=orders_policy(SECRET, AUDIT, send=["traders"],
                                                 consume=["traders", "auditors"]))


class Heard:
    """An exception listener that remembers what it heard and signals the first."""

    def __init__(self) -> None:
        self.errors: list[JMSException] = []
        self.first = threading.Event()

    def __call__(self, error: JMSException) -> None:
        self.errors.append(error)
        self.first.set()


@pytest.fixture
def connect() -> Iterator[Callable[..., tuple[Any, Heard]]]:
    made: list[Any] = []

    def make(h: ServerHandle, user: str | None = None, password: str | None = None,
             **props: Any) -> tuple[Any, Heard]:
        conn = ConnectionFactory(f"stomp://{h.host}:{h.port}", **props).create_connection(
            user, password)
        heard = Heard()
        conn.set_exception_listener(heard)
        made.append(conn)
        return conn, heard

    yield make
    for conn in made:
        try:
            conn.close()
        except JMSException:
            pass  # a windowed refusal not raised by the test itself


def count(h: ServerHandle, queue: str) -> int:
    """messageCount of ``queue`` on the broker (0 when it does not exist)."""
    stats = h.call(lambda: [s.as_dict() for s in h.broker.all_stats()])
    return sum(int(s["messageCount"]) for s in stats if s["name"] == queue)


def test_refused_persistent_send_raises_security_exception_from_send(
    secure: ServerHandle, connect: Callable[..., tuple[Any, Heard]]
) -> None:
    conn, heard = connect(secure, "audrey", AUDIT)  # auditors may not send
    session = conn.create_session()
    producer = session.create_producer(session.create_queue("orders.eu"))
    with pytest.raises(JMSSecurityException, match=r"may not send to queue 'orders\.eu'"):
        producer.send(session.create_text_message("forbidden"))
    assert heard.first.wait(5)  # the listener still hears of the ERROR and the loss
    assert "orders.eu" not in secure.call(secure.broker.queue_names)


def test_refused_non_persistent_send_still_returns_and_only_the_listener_hears(
    secure: ServerHandle, connect: Callable[..., tuple[Any, Heard]]
) -> None:
    conn, heard = connect(secure, "audrey", AUDIT)
    session = conn.create_session()
    producer = session.create_producer(session.create_queue("orders.eu"))
    producer.send(session.create_text_message("forbidden"),
                  delivery_mode=DeliveryMode.NON_PERSISTENT)  # fire and forget
    assert heard.first.wait(5)
    assert "may not send" in str(heard.errors[0])


def test_persistent_send_over_the_frame_limit_raises_resource_allocation_exception(
    server_factory: Callable[..., ServerHandle], connect: Callable[..., tuple[Any, Heard]]
) -> None:
    h = server_factory(limits=CodecLimits(max_frame_bytes=1000))
    conn, heard = connect(h)
    session = conn.create_session()
    producer = session.create_producer(session.create_queue("big"))
    with pytest.raises(ResourceAllocationException, match="max-frame-bytes"):
        producer.send(session.create_bytes_message(b"x" * 5000))
    assert heard.first.wait(5)


def test_permitted_persistent_send_returns_only_after_the_broker_has_it(
    secure: ServerHandle, connect: Callable[..., tuple[Any, Heard]]
) -> None:
    conn, _ = connect(secure, "alice", SECRET)
    session = conn.create_session()
    queue = session.create_queue("orders.us")
    producer = session.create_producer(queue)
    gate = threading.Event()
    secure.loop.call_soon_threadsafe(gate.wait, 30)  # the broker's loop stops here
    sent = threading.Event()

    def send() -> None:
        producer.send(session.create_text_message("kept"))
        sent.set()

    thread = threading.Thread(target=send)
    thread.start()
    # waits for nothing that can come: the broker cannot read the SEND, so it cannot
    # answer it, and send() must still be waiting for that answer after this time
    assert not sent.wait(0.5)
    gate.set()
    thread.join(10)
    assert sent.is_set()
    assert count(secure, "orders.us") == 1  # on the broker the moment send() returned
    conn.start()
    consumer = session.create_consumer(queue)
    received = consumer.receive(5)
    assert received is not None and received.text == "kept"


@pytest.mark.parametrize("where", ["send", "commit", "close"])
def test_windowed_refusal_is_raised_by_the_next_send_commit_or_close(
    secure: ServerHandle, connect: Callable[..., tuple[Any, Heard]], where: str
) -> None:
    conn, heard = connect(secure, "audrey", AUDIT, persistentSendWindow=4)
    session = conn.create_session()
    producer = session.create_producer(session.create_queue("orders.eu"))
    if where == "commit":
        tx_session = conn.create_session(transacted=True)
        # The broker closes after its ERROR, and a commit after a drop fails on the
        # session's own check before it reaches the transport; so the broker's loop is held
        # until commit() waits on the transport (the timer's 0.3 s is only that margin).
        gate = threading.Event()
        secure.loop.call_soon_threadsafe(gate.wait, 30)
        producer.send(session.create_text_message("forbidden"))  # in the window: returns
        threading.Timer(0.3, gate.set).start()
        with pytest.raises(TransactionRolledBackException) as info:
            tx_session.commit()
        assert isinstance(info.value.__cause__, JMSSecurityException)
        return
    producer.send(session.create_text_message("forbidden"))  # in the window: returns
    assert heard.first.wait(5)  # the ERROR has come: the next call must raise it
    if where == "send":
        with pytest.raises(JMSSecurityException, match="may not send"):
            producer.send(session.create_text_message("next"))
    else:
        with pytest.raises(JMSSecurityException, match="may not send"):
            conn.close()
        assert conn.closed


def test_windowed_permitted_sends_are_all_confirmed_by_close(
    secure: ServerHandle, connect: Callable[..., tuple[Any, Heard]]
) -> None:
    conn, heard = connect(secure, "alice", SECRET, persistentSendWindow=8)
    session = conn.create_session()
    producer = session.create_producer(session.create_queue("orders.batch"))
    for i in range(20):
        producer.send(session.create_text_message(str(i)))
    conn.close()
    assert not heard.errors
    assert count(secure, "orders.batch") == 20


def test_persistent_send_window_below_one_is_refused_with_its_range() -> None:
    from jmspy.errors import InvalidConfigurationException

    with pytest.raises(InvalidConfigurationException, match="persistentSendWindow=0"):
        ConnectionFactory("stomp://127.0.0.1:1", persistentSendWindow=0)


def test_a_full_store_refuses_persistent_sends_with_resource_allocation_exception(
    server_factory: Callable[..., ServerHandle], connect: Callable[..., tuple[Any, Heard]],
    tmp_path: Any,
) -> None:
    from jmspy.broker_ref.store.sqlite_store import SqliteStore

    store = SqliteStore(tmp_path / "m.sqlite", group_commit=True)
    # refused at once rather than held until consumers make room (producer flow control)
    h = server_factory(store=store, store_limit=store.size_bytes() + 256 * 1024,
                       send_fail_if_no_space=True)
    conn, _ = connect(h)
    session = conn.create_session()
    producer = session.create_producer(session.create_queue("full"))
    sent = 0
    with pytest.raises(ResourceAllocationException, match="store-limit reached") as err:
        for _ in range(10_000):
            producer.send(session.create_bytes_message(b"x" * 2000))
            sent += 1
    assert str(tmp_path / "m.sqlite") in str(err.value) and "store-limit" in str(err.value)
    assert 0 < sent < 10_000
    # every send() that returned is kept: the refused one, and only it, is not
    assert count(h, "full") == sent
    assert h.call(lambda: store.stored_counts()) == {"full": sent}
