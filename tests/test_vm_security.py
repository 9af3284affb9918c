"""Broker security through the public jmspy API over vm://: refusals arrive as
JMSSecurityException with a message that says what to do, and leave nothing behind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jmspy import JMSSecurityException, Queue, TextMessage, Topic
from jmspy.broker_ref.core.security import SecurityPolicy

FAST = 1_000  # PBKDF2 rounds: test-friendly; the config default is >= 100k


def _policy() -> SecurityPolicy:
    policy = SecurityPolicy(iterations=FAST)
    policy.add_user("alice", "alice-pw", roles=["traders"])
    policy.add_user("bob", "bob-pw", roles=["clerks"])
    policy.add_permission("orders.#", "queue", send=["traders", "clerks"], consume=["traders"])
    policy.add_permission("news.*", "topic", consume=["clerks"])
    policy.add_permission("temp-queue.#", "queue", send=["traders"])
    return policy


@pytest.fixture
def secure(vm_broker_factory: Callable[..., Any]) -> tuple[Any, Any]:
    host, factory = vm_broker_factory(security=_policy())
    return host, factory


def test_bad_credentials_raise_security_exception_saying_what_to_do(secure: Any) -> None:
    _, factory = secure
    with pytest.raises(JMSSecurityException) as wrong:
        factory.create_connection("alice", "nope")
    with pytest.raises(JMSSecurityException) as unknown:
        factory.create_connection("zed", "nope")
    assert "authentication failed for user 'alice'" in str(wrong.value)
    assert "check the credentials" in str(wrong.value) and "nope" not in str(wrong.value)
    assert str(unknown.value) == str(wrong.value).replace("'alice'", "'zed'")


def test_connection_without_credentials_is_rejected(secure: Any) -> None:
    _, factory = secure
    with pytest.raises(JMSSecurityException, match="pass a user name and password"):
        factory.create_connection()


def test_permitted_user_sends_and_receives(secure: Any) -> None:
    _, factory = secure
    with factory.create_connection("alice", "alice-pw") as conn:
        session = conn.create_session()
        session.create_producer(Queue("orders.eu")).send(session.create_text_message("o1"))
        consumer = session.create_consumer(Queue("orders.eu"))
        conn.start()
        got = consumer.receive(1.0)
        assert isinstance(got, TextMessage) and got.text == "o1"


def test_denied_send_raises_security_exception_and_routes_nothing(secure: Any) -> None:
    host, factory = secure
    with factory.create_connection("bob", "bob-pw") as conn:
        session = conn.create_session()
        with pytest.raises(JMSSecurityException) as err:
            session.create_producer(Queue("invoices")).send(session.create_text_message("x"))
        assert "user 'bob' may not send to queue 'invoices'" in str(err.value)
        assert "add a [[security.permissions]] entry" in str(err.value)
        with pytest.raises(JMSSecurityException):
            session.create_producer(Topic("news.eu")).send(session.create_text_message("x"))
    assert host.broker.queue_names() == [] and host.broker.topic_names() == []


def test_denied_consumer_raises_security_exception(secure: Any) -> None:
    host, factory = secure
    with factory.create_connection("bob", "bob-pw") as conn:
        session = conn.create_session()
        with pytest.raises(JMSSecurityException, match="may not consume from queue"):
            session.create_consumer(Queue("orders.eu"))
        session.create_consumer(Topic("news.eu"))  # clerks may subscribe to news.*
    assert host.broker.queue_names() == []


def test_reply_to_a_temporary_queue_needs_temp_queue_send(secure: Any) -> None:
    _, factory = secure
    with (
        factory.create_connection("bob", "bob-pw") as requester,
        factory.create_connection("alice", "alice-pw") as replier,
    ):
        req_session = requester.create_session()
        reply_to = req_session.create_temporary_queue()
        replies = req_session.create_consumer(reply_to)  # own temp queue: always allowed
        requester.start()
        rep_session = replier.create_session()
        rep_session.create_producer(reply_to).send(rep_session.create_text_message("ok"))
        got = replies.receive(1.0)
        assert isinstance(got, TextMessage) and got.text == "ok"
        bob_replies = requester.create_session()
        with pytest.raises(JMSSecurityException, match="temp-queue"):
            # bob (clerks) has no send on temp-queue.#, even to a queue he could see
            other = rep_session.create_temporary_queue()
            bob_replies.create_producer(other).send(bob_replies.create_text_message("no"))



def test_broker_stamps_the_authenticated_user_as_jmsxuserid(secure: Any) -> None:
    """The jmspy API refuses to set JMSX* itself; forging over the wire is tested in the
    core and STOMP suites. Here: the receiver of a vm:// message reads who sent it."""
    _, factory = secure
    with factory.create_connection("alice", "alice-pw") as conn:
        session = conn.create_session()
        sent = session.create_text_message("o1")
        session.create_producer(Queue("orders.id")).send(sent)
        consumer = session.create_consumer(Queue("orders.id"))
        conn.start()
        got = consumer.receive(1.0)
        assert got is not None and got.get_string_property("JMSXUserID") == "alice"
        assert sent.get_property("JMSXUserID") is None  # the producer's copy is untouched


def test_durable_subscription_cannot_be_hijacked_with_a_borrowed_client_id(
    vm_broker_factory: Callable[..., Any]
) -> None:
    """bob's durable subscription on secret.bob survives mallory connecting with bob's
    client id and re-pointing (or deleting) the same subscription name."""
    policy = _policy()
    policy.add_user("mallory", "mal-pw", roles=["public"])
    policy.add_permission("secret.bob", "topic", send=["clerks"], consume=["clerks"])
    policy.add_permission("public.*", "topic", consume=["public"])
    _, factory = vm_broker_factory(security=policy)
    factory["clientID"] = "bob"
    with factory.create_connection("bob", "bob-pw") as conn:
        conn.create_session().create_durable_consumer(Topic("secret.bob"), "s")
    with factory.create_connection("bob", "bob-pw") as conn:
        session = conn.create_session()
        session.create_producer(Topic("secret.bob")).send(session.create_text_message("pay"))
    with factory.create_connection("mallory", "mal-pw") as conn:
        session = conn.create_session()
        with pytest.raises(JMSSecurityException, match=r"may not consume from topic 'secret\.bob'"):
            session.create_durable_consumer(Topic("public.x"), "s")
        with pytest.raises(JMSSecurityException, match=r"may not consume from topic 'secret\.bob'"):
            session.unsubscribe("s")
    with factory.create_connection("bob", "bob-pw") as conn:
        consumer = conn.create_session().create_durable_consumer(Topic("secret.bob"), "s")
        conn.start()
        got = consumer.receive(1.0)
        assert isinstance(got, TextMessage) and got.text == "pay"


@pytest.mark.parametrize("pattern", ["news.#", "news.>", "*.#"])
def test_wildcard_subscriber_gets_only_topics_it_may_consume(
    vm_broker_factory: Callable[..., Any], pattern: str
) -> None:
    policy = _policy()
    policy.add_permission("*.*", "topic", consume=["clerks"])
    policy.add_permission("#", "topic", send=["traders"])
    _, factory = vm_broker_factory(security=policy)
    with factory.create_connection("bob", "bob-pw") as conn, \
            factory.create_connection("alice", "alice-pw") as sender:
        consumer = conn.create_session().create_consumer(Topic(pattern))
        conn.start()
        session = sender.create_session()
        for topic, text in (("news.internal.salaries", "secret"), ("news.eu", "open")):
            session.create_producer(Topic(topic)).send(session.create_text_message(text))
        got = consumer.receive(1.0)
        assert isinstance(got, TextMessage) and got.text == "open"
        assert consumer.receive_no_wait() is None  # routing is synchronous on vm://
