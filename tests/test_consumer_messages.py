"""MessageConsumer.messages(): iterate receive() until nothing arrives or the consumer closes."""

from __future__ import annotations

import threading
from typing import Any

from jmspy import Session


def test_messages_yields_each_message_in_order_then_ends_when_none_arrives(
    vm_factory: Any,
) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        queue = session.create_queue("it")
        producer = session.create_producer(queue)
        for i in range(3):
            producer.send(session.create_text_message(f"m{i}"))
        consumer = session.create_consumer(queue)
        conn.start()
        got = list(consumer.messages(timeout=0.2))
        assert [m.text for m in got] == ["m0", "m1", "m2"]
        got[-1].acknowledge()  # delivered through receive(): the session's mode applies
        assert consumer.receive_no_wait() is None


def test_messages_without_a_timeout_ends_when_the_consumer_closes(vm_factory: Any) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        consumer = session.create_consumer(session.create_queue("idle"))
        conn.start()
        seen: list[Any] = []
        finished = threading.Event()

        def iterate() -> None:
            seen.extend(consumer.messages())
            finished.set()

        thread = threading.Thread(target=iterate)
        thread.start()
        consumer.close()
        thread.join(30)  # bounds a hang only; closing wakes the waiting receive()
        assert finished.is_set() and seen == []
