"""Issue 3 item 4 over the wire: with security on, unauthenticated or unauthorized stomp.py
clients get an ERROR frame with a clear message, the connection closes, and nothing else
happens (no message routed, no queue auto-created, no consumer). Passwords never appear in
ERROR frames or server logs. Hashes use few PBKDF2 rounds so the tests stay fast."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import stomp
from polling import wait_until
from stomp_support import Collector, RawClient, ServerHandle, orders_policy

from jmspy.broker_ref.core.security import SecurityPolicy

SECRET = "s3cret-Pa55-wire"
AUDIT = "audit-Pa55-wire"


def policy() -> SecurityPolicy:
    return orders_policy(SECRET, AUDIT, send=["traders"], consume=["auditors"],
                         browse=["auditors"])


@pytest.fixture
def secure(server_factory: Callable[..., ServerHandle]) -> ServerHandle:
    return server_factory(security=policy())


@pytest.fixture
def clients() -> Iterator[Callable[..., tuple[Any, Collector]]]:
    """clients(handle, version, login=None, passcode=None) -> (stomp.py connection,
    Collector), connect attempted but not required to succeed; disconnected afterwards."""
    made: list[Any] = []

    def make(h: ServerHandle, version: str = "1.2", login: str | None = None,
             passcode: str | None = None) -> tuple[Any, Collector]:
        cls = stomp.Connection11 if version == "1.1" else stomp.Connection12
        conn = cls([(h.host, h.port)], heartbeats=(0, 0))
        lst = Collector()
        conn.set_listener("c", lst)
        made.append(conn)
        headers = {"host": "/"}
        if login is not None:
            headers["login"] = login
        if passcode is not None:
            headers["passcode"] = passcode
        try:
            conn.connect(wait=True, headers=headers)
        except stomp.exception.ConnectFailedException:
            pass  # the ERROR frame is in lst.errors
        return conn, lst

    yield make
    for conn in made:
        if conn.is_connected():
            try:
                conn.disconnect()
            except Exception:
                pass


def wait_error(lst: Collector, timeout: float = 2.0) -> Any:
    """The one ERROR frame the server sent, once the connection is gone."""
    assert lst.disconnected.wait(timeout), "the server did not close the connection"
    assert len(lst.errors) == 1, [e.headers for e in lst.errors]
    return lst.errors[0]


def frame_text(frame: Any) -> str:
    return " ".join(f"{k}:{v}" for k, v in frame.headers.items()) + " " + str(frame.body)


def wait_no_connections(h: ServerHandle, timeout: float = 2.0) -> None:
    wait_until(lambda: not h.connection_count(), timeout, interval=0.005)
    assert h.connection_count() == 0


# ------------------------------------------------------------------ authentication


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_connect_without_login_gets_error_with_clear_message_and_is_closed(
    secure: ServerHandle, clients: Callable[..., tuple[Any, Collector]], version: str
) -> None:
    conn, lst = clients(secure, version)
    err = wait_error(lst)
    assert not conn.is_connected()
    assert err.headers["message"].startswith("authentication required")
    assert "pass a user name and password" in err.body
    wait_no_connections(secure)
    assert secure.call(lambda: dict(secure.broker._connections)) == {}


def test_connect_without_login_raw_frames_error_then_socket_closed(secure: ServerHandle) -> None:
    with RawClient(secure.host, secure.port) as raw:
        frame = raw.connect()
        assert frame.command == "ERROR"
        assert frame.header("message").startswith("authentication required")
        assert raw.closed_by_server(2)


def test_wrong_passcode_and_unknown_user_get_the_same_error_without_the_passcode(
    secure: ServerHandle, clients: Callable[..., tuple[Any, Collector]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    attempt = SECRET + "-typo"
    _, wrong = clients(secure, "1.2", "alice", attempt)
    _, unknown = clients(secure, "1.1", "mallory", attempt)
    e1, e2 = wait_error(wrong), wait_error(unknown)
    assert e1.headers["message"] == "authentication failed for user 'alice': unknown user or " \
        "wrong password"
    assert e1.headers["message"] == e2.headers["message"].replace("'mallory'", "'alice'")
    assert e1.body == e2.body.replace("'mallory'", "'alice'")
    assert "[security.users]" in e1.body  # says where to look
    for err in (e1, e2):
        assert attempt not in frame_text(err) and SECRET not in frame_text(err)
        assert "passcode" not in err.headers
    # the server's own log records (stomp.py's client-side DEBUG log echoes its frames)
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("jmspy"))
    assert SECRET not in logged and attempt not in logged
    wait_no_connections(secure)


# ------------------------------------------------------------------ authorization


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_unauthorized_send_gets_receipted_error_and_nothing_is_routed_or_created(
    secure: ServerHandle, clients: Callable[..., tuple[Any, Collector]], version: str
) -> None:
    conn, lst = clients(secure, version, "audrey", AUDIT)  # auditors may not send
    assert conn.is_connected()
    conn.send("/queue/orders.eu", "forbidden", receipt="s1")
    err = wait_error(lst)
    assert err.headers["receipt-id"] == "s1" and "s1" not in lst.receipts
    assert err.headers["message"].startswith("user 'audrey' may not send to queue 'orders.eu'")
    assert "[[security.permissions]]" in err.body
    assert AUDIT not in frame_text(err)
    names = secure.call(secure.broker.queue_names)
    assert "orders.eu" not in names  # not auto-created by a refused send
    # a destination no permission covers at all: refused the same way, nothing created
    conn2, lst2 = clients(secure, version, "alice", SECRET)
    conn2.send("/queue/elsewhere", "x", receipt="s2")
    assert wait_error(lst2).headers["receipt-id"] == "s2"
    assert secure.call(secure.broker.queue_names) == names
    assert secure.call(lambda: [s.as_dict() for s in secure.broker.all_stats()]) == []


def test_unauthorized_send_in_transaction_routes_nothing(
    secure: ServerHandle, clients: Callable[..., tuple[Any, Collector]]
) -> None:
    conn, lst = clients(secure, "1.2", "audrey", AUDIT)
    tx = conn.begin()
    conn.send("/queue/orders.tx", "forbidden", transaction=tx)
    conn.commit(tx)
    wait_error(lst)
    assert "orders.tx" not in secure.call(secure.broker.queue_names)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_unauthorized_subscribe_gets_error_and_no_consumer_is_created(
    secure: ServerHandle, clients: Callable[..., tuple[Any, Collector]], version: str
) -> None:
    sender, slst = clients(secure, version, "alice", SECRET)
    sender.send("/queue/orders.eu", "kept", receipt="sent")
    slst.wait_receipt("sent")
    thief, tlst = clients(secure, version, "alice", SECRET)  # traders may not consume
    thief.subscribe("/queue/orders.eu", id="s", ack="auto", receipt="sub")
    err = wait_error(tlst)
    assert err.headers["message"].startswith(
        "user 'alice' may not consume from queue 'orders.eu'")
    assert err.headers["receipt-id"] == "sub" and tlst.messages == []
    st = secure.stats("orders.eu")
    assert (st["consumerCount"], st["messageCount"], st["deliveringCount"]) == (0, 1, 0)
    # no consumer on a queue that does not exist either, and it is not created
    other, olst = clients(secure, version, "alice", SECRET)
    other.subscribe("/queue/orders.none", id="s")
    wait_error(olst)
    assert "orders.none" not in secure.call(secure.broker.queue_names)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_authorized_users_send_and_consume_normally(
    secure: ServerHandle, clients: Callable[..., tuple[Any, Collector]], version: str
) -> None:
    producer, plst = clients(secure, version, "alice", SECRET)
    consumer, clst = clients(secure, version, "audrey", AUDIT)
    assert producer.is_connected() and consumer.is_connected()
    consumer.subscribe("/queue/orders.eu.fast", id="s", ack="client-individual",
                       receipt="sub")
    clst.wait_receipt("sub")
    producer.send("/queue/orders.eu.fast", "order-1", receipt="sent")
    plst.wait_receipt("sent")
    (m,) = clst.wait_messages(1)
    assert m.body == "order-1"
    if version == "1.2":
        consumer.ack(m.headers["ack"], receipt="acked")
    else:
        consumer.ack(m.headers["message-id"], "s", receipt="acked")
    clst.wait_receipt("acked")
    st = secure.stats("orders.eu.fast")
    assert (st["messageCount"], st["dequeued"], st["consumerCount"]) == (0, 1, 1)
    assert plst.errors == [] and clst.errors == []


def test_security_disabled_policy_lets_anonymous_stomp_clients_in(
    server_factory: Callable[..., ServerHandle], clients: Callable[..., tuple[Any, Collector]]
) -> None:
    p = policy()
    p.enabled = False
    h = server_factory(security=p)
    conn, lst = clients(h, "1.2")
    assert conn.is_connected()
    conn.send("/queue/anything", "x", receipt="r")
    lst.wait_receipt("r")
    assert h.stats("anything")["messageCount"] == 1 and lst.errors == []


# ------------------------------------------------------------------ stats over the wire


def _stats_over_wire(h: ServerHandle, login: str, passcode: str) -> Any:
    """SEND to /jmspy/stats as ``login``; the reply (a MESSAGE) or the ERROR frame."""
    with RawClient(h.host, h.port) as raw:
        raw.send(b"CONNECT\naccept-version:1.2\nhost:/\nlogin:" + login.encode()
                 + b"\npasscode:" + passcode.encode() + b"\n\n\x00")
        assert raw.read_frame().command == "CONNECTED"
        raw.send(b"SUBSCRIBE\nid:r\ndestination:/temp-queue/stats\n\n\x00"
                 b"SEND\ndestination:/jmspy/stats\nreply-to:/temp-queue/stats\n\n\x00")
        return raw.read_frame()


def test_stats_over_stomp_without_admin_is_refused_naming_the_permission(
    server_factory: Callable[..., ServerHandle], clients: Callable[..., tuple[Any, Collector]]
) -> None:
    p = policy()
    p.add_permission("temp-queue.#", "queue", send=["traders"], consume=["traders"])
    h = server_factory(security=p)
    producer, plst = clients(h, "1.2", "alice", SECRET)
    producer.send("/queue/orders.eu", "x", receipt="r")
    plst.wait_receipt("r")
    frame = _stats_over_wire(h, "alice", SECRET)
    assert frame.command == "ERROR", frame
    assert "may not read broker statistics" in frame.header("message")
    assert "admin" in frame.body.decode()
    assert b"orders.eu" not in frame.body


def test_stats_over_stomp_show_only_the_destinations_the_user_administers(
    server_factory: Callable[..., ServerHandle], clients: Callable[..., tuple[Any, Collector]]
) -> None:
    p = policy()
    p.add_permission("temp-queue.#", "queue", send=["auditors"], consume=["auditors"])
    p.add_permission("orders.eu", "queue", admin=["auditors"])
    h = server_factory(security=p)
    producer, plst = clients(h, "1.2", "alice", SECRET)
    for dest in ("orders.eu", "orders.us"):
        producer.send(f"/queue/{dest}", "x", receipt=dest)
        plst.wait_receipt(dest)
    frame = _stats_over_wire(h, "audrey", AUDIT)
    assert frame.command == "MESSAGE", frame
    names = {row["name"] for row in json.loads(frame.body)}
    assert "orders.eu" in names and "orders.us" not in names


# ------------------------------------------------------------------ identity


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_forged_jmsxuserid_header_is_overwritten_with_the_authenticated_user(
    secure: ServerHandle, clients: Callable[..., tuple[Any, Collector]], version: str
) -> None:
    producer, plst = clients(secure, version, "alice", SECRET)
    consumer, clst = clients(secure, version, "audrey", AUDIT)
    consumer.subscribe("/queue/orders.who", id="s", ack="auto", receipt="sub")
    clst.wait_receipt("sub")
    producer.send("/queue/orders.who", "x", headers={"JMSXUserID": "audrey"}, receipt="r")
    producer.send("/queue/orders.who", "y", receipt="r2")
    plst.wait_receipt("r2")
    got = clst.wait_messages(2)
    assert [m.headers.get("JMSXUserID") for m in got] == ["alice", "alice"]


def test_jmspy_stomp_client_reads_the_stamped_jmsxuserid(
    secure: ServerHandle, clients: Callable[..., tuple[Any, Collector]]
) -> None:
    from jmspy import ConnectionFactory, Queue

    producer, plst = clients(secure, "1.2", "alice", SECRET)
    producer.send("/queue/orders.jms", "x", headers={"JMSXUserID": "root"}, receipt="r")
    plst.wait_receipt("r")
    factory = ConnectionFactory(f"stomp://{secure.host}:{secure.port}")
    with factory.create_connection("audrey", AUDIT) as conn:
        session = conn.create_session()
        consumer = session.create_consumer(Queue("orders.jms"))
        conn.start()
        got = consumer.receive(5.0)
        assert got is not None and got.get_string_property("JMSXUserID") == "alice"


# ------------------------------------------------------------------ durable subscriptions


def test_durable_subscription_hijack_with_a_borrowed_client_id_is_refused(
    server_factory: Callable[..., ServerHandle]
) -> None:
    p = policy()
    p.add_user("bob", "bob-pw", roles=["bobs"])
    p.add_user("mallory", "mal-pw", roles=["public"])
    p.add_permission("secret.bob", "topic", send=["bobs"], consume=["bobs"])
    p.add_permission("public.*", "topic", consume=["public"])
    h = server_factory(security=p)

    def connect(raw: RawClient, login: str, passcode: str) -> None:
        raw.send(f"CONNECT\naccept-version:1.2\nhost:/\nlogin:{login}\npasscode:{passcode}\n"
                 "client-id:bob\n\n\0".encode())
        assert raw.read_frame().command == "CONNECTED"

    durable = b"\nactivemq.subscriptionName:s\nreceipt:sub\n\n\0"
    with RawClient(h.host, h.port) as bob:
        connect(bob, "bob", "bob-pw")
        bob.send(b"SUBSCRIBE\nid:1\ndestination:/topic/secret.bob" + durable)
        assert bob.read_frame().command == "RECEIPT"
    with RawClient(h.host, h.port) as sender:
        connect(sender, "bob", "bob-pw")
        sender.send(b"SEND\ndestination:/topic/secret.bob\nreceipt:r\n\nsalary\0")
        assert sender.read_frame().command == "RECEIPT"
    with RawClient(h.host, h.port) as mallory:
        connect(mallory, "mallory", "mal-pw")
        mallory.send(b"SUBSCRIBE\nid:1\ndestination:/topic/public.x" + durable)
        err = mallory.read_frame()
        assert err.command == "ERROR"
        assert err.header("message").startswith(
            "user 'mallory' may not consume from topic 'secret.bob'")
    with RawClient(h.host, h.port) as bob:
        connect(bob, "bob", "bob-pw")
        bob.send(b"SUBSCRIBE\nid:1\ndestination:/topic/secret.bob" + durable)
        frames = {f.command: f for f in (bob.read_frame(), bob.read_frame())}
        assert frames.keys() == {"RECEIPT", "MESSAGE"}
        assert frames["MESSAGE"].body == b"salary"


# ------------------------------------------------------------------ wildcard subscriptions


@pytest.mark.parametrize("pattern", ["public.#", "public.>", "*.#"])
def test_wildcard_subscription_over_stomp_never_delivers_a_topic_the_user_may_not_consume(
    server_factory: Callable[..., ServerHandle], clients: Callable[..., tuple[Any, Collector]],
    pattern: str,
) -> None:
    p = policy()
    p.add_user("sam", "sam-pw", roles=["staff"])
    p.add_permission("public.*", "topic", consume=["staff"])
    p.add_permission("*.*", "topic", consume=["staff"])
    p.add_permission("#", "topic", send=["traders"], consume=["auditors"])
    h = server_factory(security=p)
    sam, slst = clients(h, "1.2", "sam", "sam-pw")
    hr, hlst = clients(h, "1.2", "audrey", AUDIT)
    sam.subscribe(f"/topic/{pattern}", id="w", ack="auto", receipt="w")
    hr.subscribe("/topic/public.internal.salaries", id="s", ack="auto", receipt="s")
    slst.wait_receipt("w")
    hlst.wait_receipt("s")
    boss, blst = clients(h, "1.2", "alice", SECRET)
    boss.send("/topic/public.internal.salaries", "secret")
    boss.send("/topic/public.news", "open", receipt="sent")
    blst.wait_receipt("sent")
    assert [m.body for m in hlst.wait_messages(1)] == ["secret"]
    assert [m.body for m in slst.wait_messages(1)] == ["open"]
    # the hr copy arrived, so routing of the secret is done: sam got nothing more
    assert [m.body for m in slst.messages] == ["open"] and slst.errors == []
