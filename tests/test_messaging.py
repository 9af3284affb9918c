"""Destinations, message kinds and delivery features over vm://."""

from __future__ import annotations

import threading
import time

import pytest

from jmspy import (
    BytesMessage,
    DeliveryMode,
    MapMessage,
    Queue,
    Session,
    TemporaryQueue,
    TextMessage,
    Topic,
)


def test_text_bytes_and_map_messages_round_trip_with_properties_and_headers(vm_factory):
    queue = Queue("kinds")
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(queue)
        text = session.create_text_message("hello", {"region": "EU", "qty": 12})
        text.correlation_id = "corr-1"
        text.reply_to = Queue("replies")
        text.jms_type = "greeting"
        producer.send(text, priority=7)
        producer.send(session.create_bytes_message(b"\x00\x01\xff", {"ok": True}))
        producer.send(session.create_map_message({"a": 1, "b": "x", "c": 2.5, "d": b"raw"}))
        consumer = session.create_consumer(queue)
        conn.start()
        got = consumer.receive(1.0)
        assert isinstance(got, TextMessage) and got.text == "hello"
        assert got.get_property("region") == "EU" and got.get_int_property("qty") == 12
        assert got.correlation_id == "corr-1" and got.reply_to == Queue("replies")
        assert got.jms_type == "greeting" and got.priority == 7
        assert got.JMSPriority == 7 and got.JMSDestination == queue
        assert got.delivery_mode == DeliveryMode.PERSISTENT
        assert got.message_id and got.message_id.startswith("ID:")
        assert got.timestamp > 0 and got.expiration == 0 and not got.redelivered
        raw = consumer.receive(1.0)
        assert isinstance(raw, BytesMessage) and raw.body == b"\x00\x01\xff"
        assert raw.get_bool_property("ok") is True
        mapped = consumer.receive(1.0)
        assert isinstance(mapped, MapMessage)
        assert dict(mapped.map) == {"a": 1, "b": "x", "c": 2.5, "d": b"raw"}


def test_priority_higher_first_fifo_among_equals(vm_factory):
    queue = Queue("prio")
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(queue)
        for text, prio in [("l1", 1), ("h1", 9), ("m1", 4), ("h2", 9), ("l2", 1), ("m2", 4)]:
            producer.send(session.create_text_message(text), priority=prio)
        consumer = session.create_consumer(queue)
        conn.start()
        assert [consumer.receive(1.0).text for _ in range(6)] == [
            "h1", "h2", "m1", "m2", "l1", "l2"
        ]


def test_expired_messages_are_not_delivered_and_are_counted(vm_factory):
    queue = Queue("ttl")
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(queue)
        producer.send(session.create_text_message("short"), time_to_live=0.05)
        producer.send(session.create_text_message("long"), time_to_live=60)
        time.sleep(0.15)
        consumer = session.create_consumer(queue)
        conn.start()
        msg = consumer.receive(1.0)
        assert msg.text == "long" and msg.expiration > msg.timestamp
        assert consumer.receive(0.1) is None
        assert conn.destination_stats(queue)["expired"] == 1


def test_delivery_delay_holds_the_message_as_scheduled(vm_factory):
    queue = Queue("delay")
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(queue, delivery_delay=0.3)
        sent_at = time.monotonic()
        producer.send(session.create_text_message("later"))
        stats = conn.destination_stats(queue)
        assert (stats["scheduledCount"], stats["messageCount"]) == (1, 1)
        consumer = session.create_consumer(queue)
        conn.start()
        msg = consumer.receive(3.0)
        assert msg is not None and msg.text == "later"
        assert time.monotonic() - sent_at >= 0.25
        assert conn.destination_stats(queue)["scheduledCount"] == 0


def test_topic_non_durable_subscriber_gets_only_what_is_published_while_subscribed(vm_factory):
    topic = Topic("prices.eu")
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(topic)
        producer.send(session.create_text_message("before"))
        a = session.create_consumer(topic)
        b = session.create_consumer(topic)
        conn.start()
        producer.send(session.create_text_message("tick"))
        assert a.receive(1.0).text == "tick" and b.receive(1.0).text == "tick"
        assert a.receive(0.05) is None


def test_durable_subscription_keeps_messages_while_disconnected(vm_factory):
    topic = Topic("news")
    vm_factory["clientID"] = "reader-1"
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        session.create_durable_consumer(topic, "daily").close()
    with vm_factory.create_connection(client_id="writer") as conn:
        session = conn.create_session()
        producer = session.create_producer(topic)
        for text in ("one", "two"):
            producer.send(session.create_text_message(text))
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        consumer = session.create_durable_consumer(topic, "daily")
        conn.start()
        assert [consumer.receive(1.0).text for _ in range(2)] == ["one", "two"]
        consumer.close()
        session.unsubscribe("daily")


def test_shared_subscription_splits_messages_between_its_consumers(vm_factory):
    topic = Topic("work")
    vm_factory["imqConsumerFlowLimit"] = 1
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        c1 = session.create_shared_consumer(topic, "pool")
        c2 = session.create_shared_consumer(topic, "pool")
        conn.start()
        producer = session.create_producer(topic)
        for i in range(4):
            producer.send(session.create_text_message(str(i)))
        got = [m.text for m in (c1.receive(1.0), c2.receive(1.0), c1.receive(1.0), c2.receive(1.0))]
        assert sorted(got) == ["0", "1", "2", "3"]


def test_selector_filters_queue_messages(vm_factory):
    queue = Queue("orders")
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(queue)
        for region, qty in [("EU", 5), ("EU", 20), ("US", 30), ("EU", 11)]:
            props = {"region": region, "qty": qty}
            producer.send(session.create_text_message(f"{region}{qty}", props))
        consumer = session.create_consumer(queue, selector="region = 'EU' AND qty > 10")
        conn.start()
        assert [consumer.receive(1.0).text for _ in range(2)] == ["EU20", "EU11"]
        assert consumer.receive(0.05) is None
        assert conn.destination_stats(queue)["messageCount"] == 2


def test_browser_shows_messages_without_consuming(vm_factory):
    queue = Queue("browse")
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(queue)
        for i in range(3):
            producer.send(session.create_text_message(str(i), {"n": i}))
        assert [m.text for m in session.create_browser(queue)] == ["0", "1", "2"]
        assert [m.text for m in session.create_browser(queue, "n >= 1")] == ["1", "2"]
        assert conn.destination_stats(queue)["messageCount"] == 3


def test_temporary_queue_request_reply(vm_factory):
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        replies = session.create_temporary_queue()
        assert isinstance(replies, TemporaryQueue)
        requests = Queue("requests")
        server = session.create_consumer(requests)
        client_in = session.create_consumer(replies)
        conn.start()
        request = session.create_text_message("ping")
        request.reply_to = replies
        session.create_producer(requests).send(request)
        got = server.receive(1.0)
        session.create_producer(None).send(session.create_text_message("pong"), got.reply_to)
        assert client_in.receive(1.0).text == "pong"
        client_in.close()
        replies.delete()


def test_async_send_calls_the_completion_listener_on_another_thread(vm_factory):
    queue = Queue("async")
    done = threading.Event()
    seen = {}

    def on_done(message, exception):
        seen["thread"] = threading.current_thread()
        seen["error"] = exception
        seen["id"] = message.message_id
        done.set()

    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        msg = session.create_text_message("x")
        session.create_producer(queue).send(msg, completion_listener=on_done)
        assert done.wait(2.0)
        assert seen["thread"] is not threading.current_thread()
        assert seen["error"] is None and seen["id"] == msg.message_id
        assert conn.destination_stats(queue)["messageCount"] == 1


def test_received_messages_are_read_only_until_cleared(vm_factory):
    from jmspy import MessageNotWriteableException

    queue = Queue("readonly")
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        session.create_producer(queue).send(session.create_text_message("x", {"a": 1}))
        consumer = session.create_consumer(queue)
        conn.start()
        msg = consumer.receive(1.0)
        with pytest.raises(MessageNotWriteableException, match="clear_properties"):
            msg.set_property("b", 2)
        with pytest.raises(MessageNotWriteableException, match="clear_body"):
            msg.text = "y"
        msg.clear_properties()
        msg.set_property("b", 2)
        msg.clear_body()
        msg.text = "y"


def test_stats_count_enqueued_dequeued_and_consumers(vm_factory):
    queue = Queue("stats")
    with vm_factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        producer = session.create_producer(queue)
        for i in range(5):
            producer.send(session.create_text_message(str(i)))
        consumer = session.create_consumer(queue)
        conn.start()
        consumer.receive(1.0).acknowledge()
        stats = conn.destination_stats(queue)
        assert stats["enqueued"] == 5 and stats["dequeued"] == 1
        assert stats["consumerCount"] == 1 and stats["messageCount"] == 4
        assert stats["deliveringCount"] == 4


def test_every_jms_header_name_reads_its_snake_case_attribute_and_is_read_only():
    from jmspy.message import Message

    msg = TextMessage("x")
    for n, (jms_name, attr) in enumerate(Message._JMS_ALIASES.items()):
        if attr != "destination" and attr != "reply_to":
            object.__setattr__(msg, attr, n + 100)
        assert getattr(msg, jms_name) == getattr(msg, attr), jms_name
        with pytest.raises(AttributeError):
            setattr(msg, jms_name, 1)
    with pytest.raises(AttributeError, match="prority"):
        msg.prority  # noqa: B018  (a misspelt header is an AttributeError, not None)
