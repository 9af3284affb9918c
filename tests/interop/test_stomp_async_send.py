"""JMS 2.0 asynchronous sends over stomp:// against real brokers (the bundled broker,
ActiveMQ 5, RabbitMQ; started by conftest.py's fixtures, never skipped): every SEND is
written at once, each completion comes once the broker confirmed it, in send order, and
every message arrives."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from jmspy import ConnectionFactory, DeliveryMode, Message

TARGETS = ["jmspy", "activemq", "rabbitmq"]


@pytest.fixture(params=TARGETS)
def stomp_url(request: pytest.FixtureRequest) -> Iterator[str]:
    name: str = request.param
    if name == "jmspy":
        server = request.getfixturevalue("jmspy_stomp_server")
        yield f"stomp://{server.host}:{server.port}"
    elif name == "activemq":
        b = request.getfixturevalue("activemq")
        yield f"stomp://{b.host}:{b.stomp_port}"
    else:
        r = request.getfixturevalue("rabbitmq")
        yield f"stomp://{r.host}:{r.stomp_port}?rabbitmq_queue_selectors=discard"


@pytest.mark.parametrize("mode", [DeliveryMode.PERSISTENT, DeliveryMode.NON_PERSISTENT])
def test_async_sends_complete_in_send_order_and_all_arrive(stomp_url: str, mode: int) -> None:
    count = 900  # past two non-persistent checkpoints (one receipt per 400 sends)
    completed: list[int] = []
    failures: list[Exception] = []
    all_done = threading.Event()

    class Listener:
        def on_completion(self, message: Message) -> None:
            completed.append(message.get_property("n"))  # type: ignore[arg-type]
            if len(completed) == count:
                all_done.set()

        def on_exception(self, message: Message, exception: Exception) -> None:
            failures.append(exception)
            all_done.set()

    name = f"async.send.{uuid.uuid4().hex[:8]}"
    with ConnectionFactory(stomp_url).create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue(name)
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        listener = Listener()
        for n in range(count):
            producer.send(session.create_text_message(f"m{n}", {"n": n}),
                          delivery_mode=mode, completion_listener=listener)
        assert all_done.wait(60), f"{len(completed)} of {count} completed"
        assert failures == []
        assert completed == list(range(count))
        conn.start()
        got = []
        for _ in range(count):
            message = consumer.receive(30)
            assert message is not None, f"only {len(got)} of {count} arrived"
            got.append(message.get_property("n"))
        assert sorted(got) == list(range(count))
