"""Destination options: parsing ``name?a=1&b=2``, and what each broker makes of them.

Parsing is the destination's (jmspy/destinations.py); the per-broker mapping is
jmspy/transports/destination_options.py, read by the STOMP frames (to_frame, the
SUBSCRIBE headers of StompSubscription), MQTT's refusals and the in-process broker. The
real brokers' side is tests/interop/test_destination_options_interop.py.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from jmspy import Session
from jmspy.capabilities import Feature, RefusedFeatureException
from jmspy.destinations import DestinationOptions, Queue, Topic
from jmspy.errors import InvalidDestinationException
from jmspy.transport import ConsumerSpec
from jmspy.transports import destination_options as dopts
from jmspy.transports.stomp.mapping import detect_broker, to_frame
from jmspy.transports.stomp.subscription import StompSubscription


# -- parsing ---------------------------------------------------------------------------------
def test_options_after_the_question_mark_are_parsed_in_order_and_percent_decoded() -> None:
    q = Queue("orders?x-queue-type=quorum&x-max-length=1000&note=a%20b%26c%3Dd%C3%A9")
    assert q.name == "orders"
    assert list(q.options.items()) == [
        ("x-queue-type", "quorum"), ("x-max-length", "1000"), ("note", "a b&c=d\u00e9")]
    # '=' stays as it is in a value (only the first '=' of an option splits it)
    assert q.with_options_text() == (
        "orders?x-queue-type=quorum&x-max-length=1000&note=a%20b%26c=d%C3%A9")
    assert Queue(q.with_options_text()).options == q.options  # the text round-trips


def test_a_destination_is_its_name_options_ride_along() -> None:
    with_options, plain = Queue("orders?x-max-length=5"), Queue("orders")
    assert with_options == plain and hash(with_options) == hash(plain)
    assert {with_options: 1}[plain] == 1
    assert str(with_options) == "queue://orders"
    assert Topic("t?consumer.prefetchSize=1") != Queue("t")  # kinds still differ
    assert not plain.options and plain.with_options_text() == "orders"


def test_options_survive_pickling() -> None:
    """Destinations travel to Spark executors pickled."""
    q = Queue("orders?x-queue-type=stream&x-stream-offset=first")
    back = pickle.loads(pickle.dumps(q))
    assert back == q and back.options == q.options
    assert isinstance(back.options, DestinationOptions)


@pytest.mark.parametrize(("text", "says"), [
    ("orders?", "ends with '?' and no options"),
    ("orders?x-max-length", "is not name=value"),
    ("orders?=5", "is not name=value"),
    ("orders?x-max-length=", "has an empty value"),
    ("orders?a=1&&b=2", "empty option"),
    ("orders?a=1&", "empty option"),
    ("orders?x-max-length=1&x-max-length=2", "gives option 'x-max-length' twice"),
    ("orders?x-max-length=1&x-max-length=1", "twice"),  # even the same value
    ("orders?a=%ff", "not UTF-8"),
    ("orders?a=100%", "'%' not followed by two hex digits"),
    ("orders?a=%zz", "'%' not followed by two hex digits"),
    ("?a=1", "name must not be empty"),
])
def test_malformed_options_are_refused_saying_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(InvalidDestinationException) as info:
        Queue(text)
    assert says in str(info.value), str(info.value)


def test_the_options_keyword_merges_with_the_name_and_refuses_a_clash(
    vm_broker_factory: Any,
) -> None:
    _, factory = vm_broker_factory()
    with factory.create_connection() as conn:
        s = conn.create_session()
        q = s.create_queue("kw?x-max-length=4", options={"consumer.prefetchSize": 7})
        assert dict(q.options) == {"x-max-length": "4", "consumer.prefetchSize": "7"}
        t = s.create_topic("kw.t", options={"consumer.prefetchSize": 3})
        assert dict(t.options) == {"consumer.prefetchSize": "3"}
        with pytest.raises(InvalidDestinationException, match="both in its name and in options="):
            s.create_queue("kw?x-max-length=4", options={"x-max-length": 4})
        with pytest.raises(InvalidDestinationException, match="non-empty string, an int or a bool"):
            s.create_queue("kw", options={"x-max-length": 4.5})


# -- the mapping per broker ------------------------------------------------------------------
def _frame_headers(server: str, dest: Queue | Topic) -> dict[str, str]:
    from jmspy.message import TextMessage

    m = TextMessage("x")
    m.destination, m.message_id, m.timestamp = dest, "ID:1", 1
    _, _, headers = to_frame(m, detect_broker(server))
    return headers


def _subscribe_headers(server: str, dest: Queue | Topic, flow_limit: int = 1000
                       ) -> tuple[dict[str, str], int | None]:
    def require(feature: Feature, detail: str) -> None:
        raise AssertionError(f"nothing here needs {feature}")

    spec = ConsumerSpec(consumer_id=1, destination=dest, flow_limit=flow_limit)
    sub = StompSubscription.for_spec(spec, detect_broker(server), require, lambda n: n,
                                     discard_queue_selectors=False)
    return sub.headers, sub.destination_flow_limit


RABBIT = "RabbitMQ/3.10.8"
AMQ = "ActiveMQ/5.17.2"


def test_rabbitmq_queue_arguments_go_on_send_and_subscribe_the_stream_offset_on_subscribe_only(
) -> None:
    q = Queue("jq1?x-queue-type=stream&x-max-length=1000&x-message-ttl=60000"
              "&x-stream-offset=5")
    sent = _frame_headers(RABBIT, q)
    assert {k: sent[k] for k in ("x-queue-type", "x-max-length", "x-message-ttl")} == {
        "x-queue-type": "stream", "x-max-length": "1000", "x-message-ttl": "60000"}
    assert "x-stream-offset" not in sent
    subscribed, _ = _subscribe_headers(RABBIT, q)
    assert subscribed["x-queue-type"] == "stream" and subscribed["x-max-length"] == "1000"
    assert subscribed["x-stream-offset"] == "offset=5"  # the plugin's spelling of a number
    assert subscribed["prefetch-count"] == "1000"  # streams need a prefetch: always sent


def test_without_options_nothing_changes_on_the_wire() -> None:
    assert "x-queue-type" not in _frame_headers(RABBIT, Queue("jq1"))
    headers, limit = _subscribe_headers(RABBIT, Queue("jq1"))
    assert limit is None and not any(k.startswith("x-") for k in headers)


@pytest.mark.parametrize(("value", "wire"), [
    ("first", "first"), ("last", "last"), ("next", "next"), ("42", "offset=42"),
    ("offset=7", "offset=7"), ("timestamp=1700000000", "timestamp=1700000000"),
])
def test_stream_offsets_are_sent_as_rabbitmq_reads_them(value: str, wire: str) -> None:
    headers, _ = _subscribe_headers(
        RABBIT, Queue(f"s?x-queue-type=stream&x-stream-offset={value}"))
    assert headers["x-stream-offset"] == wire


def test_a_bad_stream_offset_is_refused_rather_than_silently_read_from_next() -> None:
    with pytest.raises(InvalidDestinationException, match="must be first, last, next"):
        _subscribe_headers(RABBIT, Queue("s?x-queue-type=stream&x-stream-offset=yesterday"))
    with pytest.raises(InvalidDestinationException, match="give x-queue-type=stream too"):
        _subscribe_headers(RABBIT, Queue("s?x-stream-offset=first"))


def test_consumer_prefetch_size_narrows_the_window_header_on_each_broker() -> None:
    q = Queue("w?consumer.prefetchSize=5")
    for server, header in ((RABBIT, "prefetch-count"), (AMQ, "activemq.prefetchSize"),
                           ("jmspy-broker_ref/0.1", "jmspy-flow-limit")):
        headers, limit = _subscribe_headers(server, q, flow_limit=100)
        assert (headers[header], limit) == ("5", 5), server
        # the lower of the two: a wider option leaves the client's limit in charge
        headers, limit = _subscribe_headers(server, Queue("w?consumer.prefetchSize=500"),
                                            flow_limit=100)
        assert (headers[header], limit) == ("100", 500), server


def test_activemq_consumer_options_become_activemq_subscribe_headers() -> None:
    q = Queue("a?consumer.exclusive=TRUE&consumer.priority=9")
    headers, _ = _subscribe_headers(AMQ, q)
    assert (headers["activemq.exclusive"], headers["activemq.priority"]) == ("true", "9")
    assert "activemq.exclusive" not in _frame_headers(AMQ, q)  # consumer options: SUBSCRIBE
    t_headers, _ = _subscribe_headers(AMQ, Topic("t?consumer.priority=3"))
    assert t_headers["activemq.priority"] == "3"


def test_an_unknown_option_is_refused_listing_the_ones_the_broker_takes() -> None:
    with pytest.raises(InvalidDestinationException) as info:
        dopts.resolve("stomp", "rabbitmq", Queue("q?x-queue-typ=quorum"), where="r:1")
    text = str(info.value)
    assert "unknown destination option 'x-queue-typ'" in text and "RabbitMQ" in text
    assert "(r:1)" in text
    for known in dopts.known_options("stomp", "rabbitmq"):
        assert known in text
    assert "x-queue-type" in dopts.known_options("stomp", "rabbitmq")


@pytest.mark.parametrize(("transport", "key", "text", "names"), [
    ("stomp", "rabbitmq", "q?consumer.exclusive=true", "ActiveMQ 5"),
    ("stomp", "activemq", "q?x-queue-type=quorum", "RabbitMQ"),
    ("stomp", "jmspy", "q?x-max-length=3", "ring-size / expiration-ms"),
    ("vm", "embedded", "q?consumer.priority=1", "no such feature"),
    ("stomp", "jmspy", "q?x-queue-type=quorum", "classic queues only"),
    ("vm", "embedded", "q?x-queue-type=stream", "classic queues only"),
])
def test_an_option_this_broker_cannot_carry_is_refused_naming_the_broker(
    transport: str, key: str, text: str, names: str
) -> None:
    with pytest.raises(RefusedFeatureException) as info:
        dopts.resolve(transport, key, Queue(text), where="h:1")
    err = info.value
    assert (err.feature, err.transport, err.target) == (
        Feature.DESTINATION_OPTIONS, transport, key)
    broker = dopts.OPTION_TARGETS[(transport, key)][0]
    assert f"{transport}:// transport on {broker}" in str(err) and names in str(err), str(err)


@pytest.mark.parametrize("key", ["artemis", "unknown"])
def test_brokers_without_known_options_refuse_them_all(key: str) -> None:
    with pytest.raises(RefusedFeatureException, match="no destination options known"):
        dopts.resolve("stomp", key, Queue("q?consumer.prefetchSize=1"), where="h:1")


def test_queue_arguments_are_refused_on_a_topic() -> None:
    with pytest.raises(InvalidDestinationException, match="a topic cannot take it"):
        dopts.resolve("stomp", "rabbitmq", Topic("t?x-max-length=3"), where="h:1")


def test_bad_values_are_refused_saying_what_they_must_be() -> None:
    for text, says in (("q?x-queue-type=lazy", "one of classic, quorum, stream"),
                       ("q?x-max-length=-1", "whole number >= 0"),
                       ("q?x-max-priority=300", "from 1 to 255")):
        with pytest.raises(InvalidDestinationException, match=says):
            dopts.resolve("stomp", "rabbitmq", Queue(text), where="h:1")
    with pytest.raises(InvalidDestinationException, match="true or false"):
        dopts.resolve("stomp", "activemq", Queue("q?consumer.exclusive=yes"), where="h:1")


def test_mqtt_refuses_a_message_to_a_destination_with_options() -> None:
    from jmspy.message import TextMessage
    from jmspy.transports.mqtt.mapping import unsupported_in_message

    m = TextMessage("x")
    m.destination, m.timestamp = Topic("a.b?consumer.prefetchSize=1"), 1
    feature, detail = unsupported_in_message(m) or (None, "")
    assert feature is Feature.DESTINATION_OPTIONS and "consumer.prefetchSize" in detail
    m.destination = Topic("a.b")
    assert unsupported_in_message(m) is None


# -- the in-process broker: options that are its address settings ---------------------------
def test_x_max_length_makes_an_in_process_queue_a_ring(vm_broker_factory: Any) -> None:
    host, factory = vm_broker_factory()
    with factory.create_connection() as conn:
        s = conn.create_session()
        q = s.create_queue("ring.q?x-max-length=3")
        p = s.create_producer(q)
        for i in range(5):
            p.send(s.create_text_message(str(i)))
        c = s.create_consumer(s.create_queue("ring.q"))
        conn.start()
        got = [c.receive(5.0) for _ in range(3)]
        assert [m.text for m in got if m is not None] == ["2", "3", "4"]  # head dropped
        assert c.receive_no_wait() is None
        assert host.stats("ring.q")["messagesReplaced"] == 2


def test_x_message_ttl_sets_the_in_process_queue_expiration(vm_broker_factory: Any) -> None:
    host, factory = vm_broker_factory()
    with factory.create_connection() as conn:
        conn.create_session().create_queue("ttl.q?x-message-ttl=60000")
    settings = host.broker.settings_for("ttl.q")
    assert (settings.expiration_ms, settings.expiration_model) == (60000, "earliest")
    assert host.broker.settings_for("ttl.other").expiration_ms is None  # only that queue


def test_a_directly_built_destination_is_checked_when_used(vm_broker_factory: Any) -> None:
    """No path skips the check: create_producer, an unnamed producer's send and
    create_consumer refuse what the broker cannot carry, as create_queue does."""
    _, factory = vm_broker_factory()
    bad = Queue("direct?consumer.exclusive=true")
    with factory.create_connection() as conn:
        s = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        with pytest.raises(RefusedFeatureException):
            s.create_producer(bad)
        with pytest.raises(RefusedFeatureException):
            s.create_producer().send(s.create_text_message("x"), bad)
        with pytest.raises(RefusedFeatureException):
            s.create_consumer(bad)
        with pytest.raises(RefusedFeatureException):
            s.create_queue("direct?consumer.exclusive=true")


def test_the_docs_table_is_the_rendering_of_the_option_table() -> None:
    """docs/destination-options.md shows what the code takes (regenerate with
    ``python -m jmspy.transports.destination_options docs/destination-options.md``)."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "destination-options.md"
           ).read_text()
    assert dopts.rewrite(doc) == doc
    assert "`x-stream-offset` | `x-stream-offset` on SUBSCRIBE" in doc


def test_a_stream_subscription_resumes_after_a_dropped_connection_where_it_was() -> None:
    """After a reconnect a stream consumer re-subscribes from its oldest unacknowledged
    delivery (or just past the newest one), not from its first ``x-stream-offset`` again
    (with ``first``, the whole stream once more)."""
    def require(feature: Feature, detail: str) -> None:
        raise AssertionError(feature)

    spec = ConsumerSpec(consumer_id=1, destination=Queue(
        "s?x-queue-type=stream&x-stream-offset=first"))
    sub = StompSubscription.for_spec(spec, detect_broker(RABBIT), require, lambda n: n,
                                     discard_queue_selectors=False)
    assert sub.stream and sub.copies is not None
    sub.connection_lost()  # nothing delivered yet: still from the first
    assert sub.headers["x-stream-offset"] == "first"
    for tag, offset in ((1, "5"), (2, "6"), (3, "7")):
        sub.copies[tag] = ({"x-stream-offset": offset}, b"")
    del sub.copies[1]  # acknowledged
    sub.connection_lost()
    assert sub.headers["x-stream-offset"] == "offset=6"
    sub.copies.clear()  # the re-SUBSCRIBE drops the dead copies; all were acknowledged
    sub.connection_lost()
    assert sub.headers["x-stream-offset"] == "offset=8"


def test_in_process_queue_settings_are_refused_for_a_wildcard_name(
    vm_broker_factory: Any,
) -> None:
    """An exact-name setting for ``orders.*`` would reach every queue it matches."""
    _, factory = vm_broker_factory()
    with factory.create_connection() as conn:
        s = conn.create_session()
        with pytest.raises(InvalidDestinationException, match="wildcard word"):
            s.create_queue("orders.*?x-message-ttl=5")
