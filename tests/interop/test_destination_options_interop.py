"""Destination options on real brokers: RabbitMQ quorum and stream queues and
``x-max-length``, ActiveMQ's ``consumer.prefetchSize`` and exclusive consumers, and jmspy
broker over STOMP (what it takes and what it refuses).

Every test uses its own queue; brokers are session-scoped (conftest.py).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import stomp
from capability_probes import receive_texts

from jmspy import ConnectionFactory, JMSException, Session
from jmspy.capabilities import Feature, RefusedFeatureException

WAIT = 10.0


def _name(tag: str) -> str:
    return f"dopts.{tag}.{uuid.uuid4().hex[:10]}"


def _url(broker: Any) -> str:
    return f"stomp://{broker.host}:{broker.stomp_port}"


def _nothing_more(consumer: Any) -> None:
    # waits 1 s for a message that must not come (the broker had the time to send it)
    m = consumer.receive(1.0)
    assert m is None, f"unexpected {getattr(m, 'text', m)!r}"


# -- RabbitMQ ----------------------------------------------------------------------------
def _declare_quorum_raw(rabbitmq: Any, name: str) -> None:
    """The queue declared as a quorum queue by a raw client (as an operator would)."""
    conn = stomp.Connection([(rabbitmq.host, rabbitmq.stomp_port)])
    conn.connect("guest", "guest", wait=True)
    try:
        conn.send(f"/queue/{name}", "declared", headers={"x-queue-type": "quorum",
                                                         "receipt": "r1"})
    finally:
        conn.disconnect(receipt="bye")


def test_rabbitmq_quorum_queue_needs_the_option_and_round_trips_with_it(rabbitmq: Any) -> None:
    """Without the option RabbitMQ refuses the plain declaration of an existing quorum
    queue (PRECONDITION_FAILED - inequivalent arg 'x-queue-type'); with it producer and
    consumer work, persistent and in order."""
    name = _name("quorum")
    _declare_quorum_raw(rabbitmq, name)
    with ConnectionFactory(_url(rabbitmq)).create_connection() as conn:
        s = conn.create_session()
        with pytest.raises(JMSException, match="inequivalent arg 'x-queue-type'"):
            s.create_producer(s.create_queue(name)).send(s.create_text_message("plain"))
    with ConnectionFactory(_url(rabbitmq)).create_connection() as conn:
        s = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        q = s.create_queue(f"{name}?x-queue-type=quorum")
        p = s.create_producer(q)
        for i in range(20):
            p.send(s.create_text_message(f"q{i}"))
        c = s.create_consumer(q)
        conn.start()
        first = c.receive(WAIT)
        assert first is not None and first.body == b"declared"  # the raw client's message
        assert receive_texts(c, 20) == [f"q{i}" for i in range(20)]
        s.acknowledge()
        _nothing_more(c)


def test_rabbitmq_stream_is_read_from_the_first_offset_and_recover_redelivers(
    rabbitmq: Any,
) -> None:
    """A stream queue (``x-queue-type=stream``): messages sent before the consumer exists
    are read with ``x-stream-offset=first`` (a consumer without an offset starts at
    ``next`` and sees none of them); recover() redelivers from the client's copy (a
    stream takes no NACK), marked redelivered; closing a consumer that holds unacked
    messages leaves the connection working."""
    name = _name("stream")
    with ConnectionFactory(_url(rabbitmq)).create_connection() as conn:
        s = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        p = s.create_producer(s.create_queue(f"{name}?x-queue-type=stream"))
        for i in range(5):
            p.send(s.create_text_message(f"s{i}"))
        late = s.create_consumer(s.create_queue(f"{name}?x-queue-type=stream"))
        c = s.create_consumer(s.create_queue(f"{name}?x-queue-type=stream&x-stream-offset=first"))
        conn.start()
        assert receive_texts(c, 3) == ["s0", "s1", "s2"]
        s.recover()
        again = [c.receive(WAIT) for _ in range(5)]
        assert [m.text for m in again if m is not None] == [f"s{i}" for i in range(5)]
        assert [m.redelivered for m in again if m is not None] == [True] * 3 + [False] * 2
        _nothing_more(late)  # 'next': nothing of what was there before it
        c.close()  # unacked messages: a NACK here would close the connection
        s.acknowledge()
        p.send(s.create_text_message("after"))
        assert receive_texts(late, 1) == ["after"]


def test_rabbitmq_stream_offset_number_starts_at_that_offset(rabbitmq: Any) -> None:
    name = _name("offset")
    with ConnectionFactory(_url(rabbitmq)).create_connection() as conn:
        s = conn.create_session()
        p = s.create_producer(s.create_queue(f"{name}?x-queue-type=stream"))
        for i in range(5):
            p.send(s.create_text_message(f"o{i}"))
        c = s.create_consumer(s.create_queue(f"{name}?x-queue-type=stream&x-stream-offset=3"))
        conn.start()
        assert receive_texts(c, 2) == ["o3", "o4"]


def test_rabbitmq_x_max_length_drops_the_oldest(rabbitmq: Any) -> None:
    name = _name("maxlen")
    with ConnectionFactory(_url(rabbitmq)).create_connection() as conn:
        s = conn.create_session()
        q = s.create_queue(f"{name}?x-max-length=3")
        p = s.create_producer(q)
        for i in range(6):
            p.send(s.create_text_message(f"m{i}"))
        c = s.create_consumer(q)
        conn.start()
        assert receive_texts(c, 3) == ["m3", "m4", "m5"]
        _nothing_more(c)


def test_rabbitmq_refuses_activemq_options_naming_itself(rabbitmq: Any) -> None:
    with ConnectionFactory(_url(rabbitmq)).create_connection() as conn:
        s = conn.create_session()
        with pytest.raises(RefusedFeatureException) as info:
            s.create_queue(f"{_name('x')}?consumer.exclusive=true")
    assert info.value.feature is Feature.DESTINATION_OPTIONS
    assert "RabbitMQ" in str(info.value) and f"{rabbitmq.stomp_port}" in str(info.value)


# -- ActiveMQ 5 --------------------------------------------------------------------------
def test_activemq_prefetch_size_limits_what_the_broker_sends_that_consumer(
    activemq: Any,
) -> None:
    """Two consumers on one queue: the one with ``consumer.prefetchSize=2`` never has
    more than 2 messages from the broker (its window says so), and ActiveMQ gives the
    rest to the other."""
    name = _name("prefetch")
    factory = ConnectionFactory(_url(activemq), imqConsumerFlowLimit=100)
    with factory.create_connection() as conn:
        s = conn.create_session()
        narrow = s.create_consumer(s.create_queue(f"{name}?consumer.prefetchSize=2"))
        wide = s.create_consumer(s.create_queue(name))
        stats = narrow.flow_stats()
        assert (stats.limit, stats.limited_by) == (2, "destination")
        conn.start()
        p = s.create_producer(s.create_queue(name))
        for i in range(12):
            p.send(s.create_text_message(f"p{i}"))
        assert len(receive_texts(wide, 10)) == 10
        _nothing_more(wide)
        held = conn._transport.consumer_state(narrow.consumer_id)
        assert held["in_flight_max"] == 2 and narrow.flow_stats().buffered == 2, held
        assert len(receive_texts(narrow, 2)) == 2


def _one_of_two_takes_all(broker: Any, tag: str, options: tuple[str, str], to: int) -> None:
    """Two consumers of one queue, created in order, the first with ``options[0]`` on its
    name, the second with ``options[1]``: consumer ``to`` gets all ten messages, the other
    none."""
    name = _name(tag)
    with ConnectionFactory(_url(broker)).create_connection() as conn:
        s = conn.create_session()
        consumers = [s.create_consumer(s.create_queue(name + o)) for o in options]
        conn.start()
        p = s.create_producer(s.create_queue(name))
        for i in range(10):
            p.send(s.create_text_message(f"{tag}{i}"))
        assert receive_texts(consumers[to], 10) == [f"{tag}{i}" for i in range(10)]
        _nothing_more(consumers[1 - to])


def test_activemq_exclusive_consumer_gets_the_whole_queue(activemq: Any) -> None:
    _one_of_two_takes_all(activemq, "exclusive", ("?consumer.exclusive=true", ""), to=0)


def test_activemq_consumer_priority_prefers_the_higher_consumer(activemq: Any) -> None:
    """ActiveMQ dispatches to the highest-priority consumer while its window has room."""
    _one_of_two_takes_all(activemq, "priority", ("", "?consumer.priority=10"), to=1)


def test_activemq_refuses_rabbitmq_queue_arguments_naming_itself(activemq: Any) -> None:
    with ConnectionFactory(_url(activemq)).create_connection() as conn:
        s = conn.create_session()
        with pytest.raises(RefusedFeatureException, match="on ActiveMQ 5"):
            s.create_queue(f"{_name('x')}?x-queue-type=quorum")
        with pytest.raises(JMSException, match=r"the options it takes are consumer\.exclusive"):
            s.create_queue(f"{_name('x')}?consumer.prefetchsize=1")  # case matters


# -- jmspy broker over STOMP -------------------------------------------------------------
def test_jmspy_broker_takes_the_window_option_and_refuses_queue_settings(
    jmspy_stomp_server: Any,
) -> None:
    url = f"stomp://{jmspy_stomp_server.host}:{jmspy_stomp_server.port}"
    name = _name("jmspy")
    with ConnectionFactory(url).create_connection() as conn:
        s = conn.create_session()
        q = s.create_queue(f"{name}?consumer.prefetchSize=3&x-queue-type=classic")
        c = s.create_consumer(q)
        assert (c.flow_stats().limit, c.flow_stats().limited_by) == (3, "destination")
        conn.start()
        p = s.create_producer(s.create_queue(name))
        for i in range(5):
            p.send(s.create_text_message(f"j{i}"))
        assert receive_texts(c, 5) == [f"j{i}" for i in range(5)]
        with pytest.raises(RefusedFeatureException, match="ring-size / expiration-ms"):
            s.create_queue(f"{name}?x-max-length=3")
        with pytest.raises(RefusedFeatureException, match="classic queues only"):
            s.create_queue(f"{name}?x-queue-type=quorum")
        with pytest.raises(RefusedFeatureException, match="on jmspy broker"):
            s.create_queue(f"{name}?consumer.exclusive=true")
