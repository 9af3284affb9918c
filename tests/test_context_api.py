"""The JMS 2.0 simplified API: ``factory.create_context()`` -> JMSContext, whose producer
sends a body as it is and whose consumer returns bodies typed, over the same core."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jmspy import (
    BytesMessage,
    ConnectionFactory,
    DeliveryMode,
    IllegalStateException,
    JMSConsumer,
    JMSContext,
    JMSException,
    JMSProducer,
    MapMessage,
    Message,
    MessageFormatException,
    TextMessage,
)

WAIT = 10.0  # s: receive() timeouts, never reached when the behaviour is right
ROOT = Path(__file__).resolve().parent.parent


def test_send_maps_each_body_type_to_its_message_type(vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_context() as context:
        queue = context.create_queue("bodies")
        producer = context.create_producer()
        assert isinstance(producer, JMSProducer)
        producer.send(queue, "text").send(queue, b"\x00\xff").send(queue, {"k": 1, "b": b"x"})
        producer.send(queue, None)
        producer.send(queue, context.create_text_message("as it is"))
        consumer = context.create_consumer(queue)
        assert isinstance(consumer, JMSConsumer)
        got = [consumer.receive(WAIT) for _ in range(5)]
        assert [type(m) for m in got] == [TextMessage, BytesMessage, MapMessage, TextMessage,
                                          TextMessage]
        first, second, third, fourth, fifth = got
        assert isinstance(first, TextMessage) and first.text == "text"
        assert isinstance(second, BytesMessage) and second.body == b"\x00\xff"
        assert isinstance(third, MapMessage) and dict(third.map) == {"k": 1, "b": b"x"}
        assert isinstance(fourth, TextMessage) and fourth.text is None
        assert isinstance(fifth, TextMessage) and fifth.text == "as it is"
        with pytest.raises(MessageFormatException, match="str, bytes, a dict or a Message"):
            producer.send(queue, 12.5)  # type: ignore[arg-type]


def test_fluent_setters_apply_to_every_later_send(vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_context() as context:
        queue = context.create_queue("fluent")
        reply = context.create_queue("reply")
        producer = context.create_producer()
        same = (producer.set_delivery_mode(DeliveryMode.NON_PERSISTENT).set_priority(8)
                .set_time_to_live(60).set_property("region", "EU").set_property("qty", 3)
                .set_jms_correlation_id("c-1").set_jms_type("order").set_jms_reply_to(reply))
        assert same is producer
        producer.send(queue, "one").send(queue, "two")
        consumer = context.create_consumer(queue, selector="region = 'EU' AND qty = 3")
        for text in ("one", "two"):
            message = consumer.receive(WAIT)
            assert isinstance(message, TextMessage) and message.text == text
            assert (message.delivery_mode, message.priority) == (DeliveryMode.NON_PERSISTENT, 8)
            assert message.expiration > message.timestamp
            assert (message.correlation_id, message.jms_type) == ("c-1", "order")
            assert message.reply_to == reply
        producer.set_property("region", None).send(queue, "three")
        assert consumer.receive_no_wait() is None  # selector: region no longer set
        with pytest.raises(JMSException, match="priority must be an int from 0 to 9"):
            producer.set_priority(10)


def test_receive_body_returns_the_body_typed_and_refuses_another_type_redelivering_it(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_context() as context:  # AUTO_ACKNOWLEDGE
        queue = context.create_queue("typed")
        producer = context.create_producer()
        producer.send(queue, b"raw").send(queue, "text").send(queue, {"a": 1})
        consumer = context.create_consumer(queue)
        with pytest.raises(MessageFormatException,
                           match="is a BytesMessage, whose body is bytes, not str"):
            consumer.receive_body(str, timeout=WAIT)
        again = consumer.receive(WAIT)  # not acknowledged: delivered again, marked so
        assert isinstance(again, BytesMessage) and again.body == b"raw"
        assert again.redelivered and again.delivery_count == 2
        assert consumer.receive_body(str, timeout=WAIT) == "text"
        assert consumer.receive_body(object, timeout=WAIT) == {"a": 1}
        assert consumer.receive_body(str, timeout=0.05) is None  # nothing left in time
        assert consumer.receive_body_no_wait(bytes) is None
        with pytest.raises(MessageFormatException, match="not <class 'int'>"):
            consumer.receive_body(int)  # refused before anything is taken
        producer.send(queue, "left")
        # vm:// hands a delivery over on the sender's thread: it is there at once
        assert consumer.receive_body_no_wait(str) == "left"
        context.close()


def test_receive_body_of_a_wrong_type_in_client_acknowledge_counts_as_delivered(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_context(session_mode=JMSContext.CLIENT_ACKNOWLEDGE) as context:
        queue = context.create_queue("client")
        context.create_producer().send(queue, {"m": 1})
        consumer = context.create_consumer(queue)
        with pytest.raises(MessageFormatException):
            consumer.receive_body(bytes, timeout=WAIT)
        assert consumer.receive_no_wait() is None  # not redelivered at once
        context.recover()  # settled by recover(): it comes again
        assert consumer.receive_body(dict, timeout=WAIT) == {"m": 1}
        context.acknowledge()
        assert context._connection.destination_stats(queue)["messageCount"] == 0


def test_a_transacted_context_commits_and_rolls_back_sends_and_receives(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_context(session_mode=JMSContext.SESSION_TRANSACTED) as context:
        assert context.session_mode is JMSContext.SESSION_TRANSACTED
        queue = context.create_queue("tx")
        producer = context.create_producer()
        consumer = context.create_consumer(queue)
        producer.send(queue, "dropped")
        context.rollback()
        producer.send(queue, "kept")
        assert consumer.receive_no_wait() is None  # not published before commit
        context.commit()
        assert consumer.receive_body(str, timeout=WAIT) == "kept"
        context.rollback()
        message = consumer.receive(WAIT)
        assert isinstance(message, TextMessage) and message.text == "kept"
        assert message.redelivered
        context.commit()
        assert consumer.receive_no_wait() is None


def test_a_context_browses_a_queue_without_consuming_it(vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_context() as context:
        queue = context.create_queue("browsed")
        context.create_producer().send(queue, "a").send(queue, "b")
        with context.create_browser(queue) as browser:
            assert [getattr(m, "text", None) for m in browser] == ["a", "b"]
        assert context.create_consumer(queue).receive_body(str, timeout=WAIT) == "a"


def test_the_first_consumer_starts_the_connection_unless_auto_start_is_off(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_context() as context:
        queue = context.create_queue("auto")
        context.create_producer().send(queue, "x")
        assert not context._connection.started
        consumer = context.create_consumer(queue)
        assert context._connection.started
        assert consumer.receive_body(str, timeout=WAIT) == "x"
    with vm_factory.create_context() as context:
        context.set_auto_start(False)
        queue = context.create_queue("manual")
        context.create_producer().send(queue, "y")
        consumer = context.create_consumer(queue)
        assert consumer.receive_no_wait() is None  # stopped: nothing handed out
        context.start()
        assert consumer.receive_body(str, timeout=WAIT) == "y"


def test_a_listener_on_a_context_consumer_runs_off_the_callers_thread(
        vm_factory: ConnectionFactory) -> None:
    got: list[tuple[str | None, str]] = []
    done = threading.Event()

    def listener(message: Message) -> None:
        got.append((getattr(message, "text", None), threading.current_thread().name))
        done.set()

    with vm_factory.create_context() as context:
        topic = context.create_topic("news")
        consumer = context.create_consumer(topic)
        consumer.set_message_listener(listener)
        assert consumer.message_listener is listener
        context.create_producer().send(topic, "headline")
        assert done.wait(WAIT)
    assert got[0][0] == "headline"
    assert got[0][1] != threading.current_thread().name


def test_async_send_through_set_async_tells_the_listener_on_the_notifier_thread(
        vm_factory: ConnectionFactory) -> None:
    heard: list[tuple[str | None, Exception | None, str]] = []
    done = threading.Event()

    def listener(message: Message, error: Exception | None) -> None:
        heard.append((getattr(message, "text", None), error, threading.current_thread().name))
        done.set()

    with vm_factory.create_context() as context:
        queue = context.create_queue("async")
        context.create_producer().set_async(listener).send(queue, "later")
        assert done.wait(WAIT)
        assert context.create_consumer(queue).receive_body(str, timeout=WAIT) == "later"
    assert heard[0][:2] == ("later", None)
    assert heard[0][2].startswith("jmspy-notifier-")


def test_iterating_a_context_consumer_ends_when_the_context_closes(
        vm_factory: ConnectionFactory) -> None:
    context = vm_factory.create_context()
    queue = context.create_queue("iter")
    context.create_producer().send(queue, "a").send(queue, "b")
    consumer = context.create_consumer(queue)
    seen: list[str | None] = []
    finished = threading.Event()

    def run() -> None:
        for message in consumer:
            seen.append(getattr(message, "text", None))
            if len(seen) == 2:
                threading.Thread(target=context.close).start()
        finished.set()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)  # bounds a hang only: closing the context wakes the loop
    assert finished.is_set() and seen == ["a", "b"]
    assert context.closed and consumer.closed


def test_a_closed_context_refuses_everything_naming_itself(
        vm_factory: ConnectionFactory) -> None:
    context = vm_factory.create_context()
    queue = context.create_queue("closed")
    producer = context.create_producer()
    context.close()
    context.close()  # twice is fine
    calls: list[Callable[[], object]] = [
        lambda: context.create_queue("q"), context.create_producer,
        lambda: context.create_consumer(queue), context.commit, context.recover,
        context.acknowledge, context.start, context.create_temporary_topic,
        lambda: context.create_text_message("x"),
    ]
    for call in calls:
        with pytest.raises(IllegalStateException, match="the JMSContext is closed; create"):
            call()
    with pytest.raises(IllegalStateException, match="connection is closed"):
        producer.send(queue, "late")


def test_a_context_whose_session_cannot_be_made_closes_its_connection(
        vm_factory: ConnectionFactory) -> None:
    opened: list[Any] = []

    class Recording(ConnectionFactory):
        def create_connection(self, user: str | None = None, password: str | None = None,
                              *, client_id: str | None = None) -> Any:
            opened.append(super().create_connection(user, password, client_id=client_id))
            return opened[-1]

    with pytest.raises(JMSException, match="unknown acknowledge mode 99"):
        Recording(vm_factory.url).create_context(session_mode=99)
    assert len(opened) == 1 and opened[0].closed


def test_context_credentials_reach_the_broker(vm_broker_factory: Callable[..., Any]) -> None:
    from jmspy import JMSSecurityException
    from jmspy.broker_ref.core.security import SecurityPolicy

    policy = SecurityPolicy(iterations=1_000)  # test-friendly hashing rounds
    policy.add_user("alice", "alice-pw", roles=["traders"])
    policy.add_permission("orders.#", "queue", send=["traders"], consume=["traders"])
    _, factory = vm_broker_factory(security=policy)
    with pytest.raises(JMSSecurityException, match="alice"):
        factory.create_context("alice", "wrong")
    with factory.create_context("alice", "alice-pw") as context:
        queue = context.create_queue("orders.eu")
        context.create_producer().send(queue, "ok")
        assert context.create_consumer(queue).receive_body(str, timeout=WAIT) == "ok"


def test_context_over_the_bundled_broker_by_stomp(
        vm_broker_factory: Callable[..., Any]) -> None:
    host, _ = vm_broker_factory()
    factory = ConnectionFactory(host.add_connector("stomp://127.0.0.1:0"))
    with factory.create_context(session_mode=JMSContext.CLIENT_ACKNOWLEDGE) as context:
        queue = context.create_queue("over-stomp")
        context.create_producer().set_property("n", 1).send(queue, "hi").send(queue, b"b")
        consumer = context.create_consumer(queue, selector="n = 1")
        assert consumer.receive_body(str, timeout=WAIT) == "hi"
        assert consumer.receive_body(bytes, timeout=WAIT) == b"b"
        context.acknowledge()


def test_receive_body_is_typed_for_mypy_strict(tmp_path: Path) -> None:
    """``receive_body(str)`` is ``str | None`` and ``receive_body(bytes)`` ``bytes | None``
    to mypy --strict (checked from the source tree, as the lint job checks the package)."""
    snippet = tmp_path / "typed_bodies.py"
    snippet.write_text(textwrap.dedent("""
        from typing import assert_type

        from jmspy import ConnectionFactory, JMSContext, Message

        def use(factory: ConnectionFactory) -> None:
            with factory.create_context(session_mode=JMSContext.CLIENT_ACKNOWLEDGE) as ctx:
                consumer = ctx.create_consumer(ctx.create_queue("q"))
                assert_type(consumer.receive_body(str, timeout=1.0), str | None)
                assert_type(consumer.receive_body_no_wait(bytes), bytes | None)
                assert_type(consumer.receive(1.0), Message | None)
                ctx.create_producer().set_priority(1).send(ctx.create_topic("t"), "x")
    """))
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--no-incremental", str(snippet)],
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
