"""OpenTelemetry spans (jmspy/telemetry.py), read back from the SDK's in-memory exporter.

Each test instruments with its own tracer provider (``telemetry.instrument``) and
uninstruments after, so the rest of the suite's connections stay untraced; the global
provider path and "nothing imported, nothing traced when not configured" run in a fresh
interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind
from polling import wait_until
from span_support import assert_child_and_linked, linked, named

import jmspy.telemetry as telemetry
from jmspy import ConnectionFactory, Session


def _vm() -> str:
    return f"vm://otel-{uuid.uuid4().hex[:8]}"


def test_send_and_receive_spans_on_vm(spans: InMemorySpanExporter) -> None:
    with ConnectionFactory(_vm()).create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue("orders")
        consumer = session.create_consumer(queue)
        conn.start()
        message = session.create_text_message("hello")
        message.correlation_id = "conv-7"
        session.create_producer(queue).send(message)
        received = consumer.receive(5)
        assert received is not None and received.text == "hello"

    (send,) = named(spans, "send orders")
    assert send.kind is SpanKind.PRODUCER
    attrs = dict(send.attributes or {})
    assert attrs["messaging.system"] == "jmspy"
    assert attrs["messaging.destination.name"] == "orders"
    assert attrs["messaging.operation.type"] == "send"
    assert attrs["messaging.operation.name"] == "send"
    assert attrs["messaging.message.id"] == message.message_id
    assert attrs["messaging.message.conversation_id"] == "conv-7"

    (receive,) = named(spans, "receive orders")
    assert receive.kind is SpanKind.CLIENT
    rattrs = dict(receive.attributes or {})
    assert rattrs["messaging.operation.type"] == "receive"
    assert rattrs["messaging.message.id"] == message.message_id
    assert linked(send, receive)
    # the context travelled as a W3C property of the message
    traceparent = received.get_string_property("traceparent")
    send_ctx = send.get_span_context()
    assert send_ctx is not None and traceparent is not None
    assert traceparent.split("-")[1:3] == [f"{send_ctx.trace_id:032x}",
                                           f"{send_ctx.span_id:016x}"]


def _listen_and_settle(url: str, exporter: InMemorySpanExporter, *,
                       shared: bool = False) -> tuple[ReadableSpan, ReadableSpan]:
    """Send one message from one connection, process it in a listener of another,
    acknowledge it (CLIENT_ACKNOWLEDGE); the send and process spans."""
    got = threading.Event()
    seen: list[Any] = []
    with ConnectionFactory(url).create_connection() as consuming, \
            ConnectionFactory(url).create_connection() as producing:
        session = consuming.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        topic_name = f"prices{uuid.uuid4().hex[:6]}"
        if shared:
            destination = session.create_topic(topic_name)
            consumer = session.create_shared_consumer(destination, "pricing")
        else:
            destination = session.create_queue(topic_name)
            consumer = session.create_consumer(destination)

        def on_message(message: Any) -> None:
            seen.append(message)
            message.acknowledge()
            got.set()

        consumer.set_message_listener(on_message)
        assert consumer.message_listener is on_message
        consuming.start()
        psession = producing.create_session()
        psession.create_producer(destination).send(psession.create_text_message("1"))
        assert got.wait(10)  # the listener's message.acknowledge() is the settle
        assert wait_until(lambda: named(exporter, f"process {topic_name}"), 10)
    (send,) = named(exporter, f"send {topic_name}")
    (process,) = named(exporter, f"process {topic_name}")
    assert process.kind is SpanKind.CONSUMER
    assert_child_and_linked(send, process)
    (settle,) = named(exporter, f"settle {topic_name}")
    sattrs = dict(settle.attributes or {})
    assert sattrs["messaging.operation.type"] == "settle"
    assert sattrs["messaging.operation.name"] == "ack"
    return send, process


def test_a_listener_runs_in_a_process_span_child_of_the_send_on_vm(
        spans: InMemorySpanExporter) -> None:
    _send, process = _listen_and_settle(_vm(), spans)
    assert dict(process.attributes or {})["messaging.system"] == "jmspy"


def test_shared_subscription_names_the_consumer_group(spans: InMemorySpanExporter) -> None:
    _, process = _listen_and_settle(_vm(), spans, shared=True)
    assert dict(process.attributes or {})["messaging.consumer.group.name"] == "pricing"


def test_the_link_crosses_stomp_to_the_bundled_broker(spans: InMemorySpanExporter) -> None:
    from stomp_server.stomp_support import ServerHandle

    handle = ServerHandle()
    try:
        send, process = _listen_and_settle(f"stomp://127.0.0.1:{handle.port}", spans)
    finally:
        handle.stop()
    for span in (send, process):
        attrs = dict(span.attributes or {})
        assert attrs["messaging.system"] == "jmspy"  # from CONNECTED's server header
        assert attrs["server.address"] == "127.0.0.1"
        assert attrs["server.port"] == handle.port


def test_over_mqtt_the_bundled_broker_names_itself_in_sys_broker_version(
        spans: InMemorySpanExporter, vm_broker_factory: Any) -> None:
    """MQTT's CONNACK names no server: messaging.system comes from the broker's retained
    $SYS/broker/version (as Mosquitto's), asked once at connect."""
    host, _ = vm_broker_factory()
    url = host.add_connector("mqtt://127.0.0.1:0")
    send, process = _listen_and_settle(url, spans, shared=True)
    for span in (send, process):
        assert dict(span.attributes or {})["messaging.system"] == "jmspy"


class _SilentBroker:
    """paho's client face, for a broker that grants (or refuses) the $SYS filter and
    publishes nothing there: its SUBACK and UNSUBACK codes come back in order."""

    def __init__(self, sub_codes: list[Any] | None) -> None:
        self.sub_codes = sub_codes
        self.callbacks: dict[str, Any] = {}
        self.sent: list[str] = []

    def message_callback_add(self, topic: str, callback: Any) -> None:
        self.callbacks[topic] = callback

    def message_callback_remove(self, topic: str) -> None:
        del self.callbacks[topic]

    def subscribe(self, topic: str, qos: int) -> tuple[int, int]:
        self.sent.append(f"SUBSCRIBE {topic}")
        return 0, 1

    def unsubscribe(self, topic: str) -> tuple[int, int]:
        self.sent.append(f"UNSUBSCRIBE {topic}")
        return 0, 2

    def wait(self, rc: int, mid: int, timeout: float) -> list[Any] | None:
        return self.sub_codes if mid == 1 else []


class _Code:
    def __init__(self, failure: bool) -> None:
        self.is_failure = failure


@pytest.mark.parametrize("codes", [[_Code(False)], [_Code(True)], None],
                         ids=["granted-but-silent", "refused", "no-suback"])
def test_a_broker_without_a_version_topic_leaves_it_empty_and_cleans_up(
        codes: list[Any] | None) -> None:
    from jmspy.transports.mqtt.identify import VERSION_TOPIC, broker_version

    broker = _SilentBroker(codes)
    assert broker_version(broker, broker.wait, 5.0) == ""
    assert broker.sent == [f"SUBSCRIBE {VERSION_TOPIC}", f"UNSUBSCRIBE {VERSION_TOPIC}"]
    assert broker.callbacks == {}  # the connection's own dispatch is as before


@pytest.mark.parametrize(("described", "system"), [
    ("mosquitto version 2.0.11", "mosquitto"), ("jmspy-broker_ref/0.1", "jmspy"),
    ("EMQX 5.8.1", "emqx"), ("HiveMQ Edge 2024.1", "hivemq"), ("nanomq 0.21", "nanomq"),
    ("", "")])
def test_a_broker_self_description_maps_to_the_conventions_system_name(
        described: str, system: str) -> None:
    assert telemetry._system_of(described) == system


@pytest.mark.parametrize("mode", [Session.CLIENT_ACKNOWLEDGE, Session.INDIVIDUAL_ACKNOWLEDGE])
def test_message_acknowledge_and_session_acknowledge_are_settle_spans(
        spans: InMemorySpanExporter, mode: int) -> None:
    """``message.acknowledge()`` (CLIENT and INDIVIDUAL) settles inside a span named for
    the message's destination, as ``session.acknowledge()`` does for the session's; a
    mode where ``acknowledge()`` does nothing (AUTO) makes no span."""
    name = f"acks{uuid.uuid4().hex[:6]}"
    with ConnectionFactory(_vm()).create_connection() as conn:
        session = conn.create_session(ack_mode=mode)
        auto = conn.create_session()
        queue = session.create_queue(name)
        producer = auto.create_producer(queue)
        for text in ("a", "b"):
            producer.send(auto.create_text_message(text))
        consumer = session.create_consumer(queue)
        conn.start()
        first = consumer.receive(5)
        assert first is not None
        first.acknowledge()
        second = consumer.receive(5)
        assert second is not None
        if mode == Session.CLIENT_ACKNOWLEDGE:
            session.acknowledge()
        else:
            second.acknowledge()
        auto_consumer = auto.create_consumer(auto.create_queue(name + "-auto"))
        auto.create_producer(auto.create_queue(name + "-auto")).send(
            auto.create_text_message("c"))
        received = auto_consumer.receive(5)
        assert received is not None
        received.acknowledge()  # AUTO: nothing to settle, no span
    settles = named(spans, f"settle {name}")
    assert len(settles) == 2
    assert all(dict(s.attributes or {})["messaging.operation.name"] == "ack" for s in settles)
    assert named(spans, f"settle {name}-auto") == []


def test_commit_is_a_settle_span(spans: InMemorySpanExporter) -> None:
    with ConnectionFactory(_vm()).create_connection() as conn:
        session = conn.create_session(transacted=True)
        queue = session.create_queue("tx")
        session.create_producer(queue).send(session.create_text_message("x"))
        session.commit()
    (settle,) = named(spans, "settle")  # no consumer: no one destination to name
    assert dict(settle.attributes or {})["messaging.operation.name"] == "commit"


def test_a_failing_listener_marks_its_span(spans: InMemorySpanExporter) -> None:
    failed = threading.Event()
    with ConnectionFactory(_vm()).create_connection() as conn:
        conn.set_exception_listener(lambda exc: failed.set())
        session = conn.create_session()
        queue = session.create_queue("boom")

        def on_message(message: Any) -> None:
            consumer.set_message_listener(None)
            raise ValueError("no")

        consumer = session.create_consumer(queue)
        consumer.set_message_listener(on_message)
        conn.start()
        session.create_producer(queue).send(session.create_text_message("x"))
        assert wait_until(lambda: named(spans, "process boom"), 10)
    (process,) = named(spans, "process boom")
    assert not process.status.is_ok
    assert any(e.name == "exception" for e in process.events)


_FRESH = """
import sys, jmspy
from jmspy import ConnectionFactory
with ConnectionFactory("vm://fresh").create_connection() as conn:
    s = conn.create_session()
    q = s.create_queue("q")
    c = s.create_consumer(q)
    conn.start()
    s.create_producer(q).send(s.create_text_message("x"))
    m = c.receive(5)
    print(sorted(m.property_names()), conn._telemetry,
          any(n.startswith("opentelemetry") for n in sys.modules))
"""


def test_nothing_is_imported_or_traced_when_not_configured() -> None:
    out = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["[]", "None", "False"]


_GLOBAL = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from jmspy import ConnectionFactory
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
with ConnectionFactory("vm://global").create_connection() as conn:
    s = conn.create_session()
    q = s.create_queue("g")
    s.create_producer(q).send(s.create_text_message("x"))
print(*[sp.name for sp in exporter.get_finished_spans()])
"""


def test_a_configured_global_tracer_provider_is_used() -> None:
    out = subprocess.run([sys.executable, "-c", _GLOBAL], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["send", "g"]


# -- metrics -------------------------------------------------------------------------------
def _points(reader: Any, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    return [point
            for rm in data.resource_metrics for sm in rm.scope_metrics
            for metric in sm.metrics if metric.name == name
            for point in metric.data.data_points]


def test_metrics_after_a_known_workload() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    telemetry.instrument(tracer_provider=TracerProvider(), meter_provider=meters)
    try:
        done = threading.Event()
        handled: list[Any] = []
        with ConnectionFactory(_vm()).create_connection() as conn:
            session = conn.create_session()
            pulled, pushed, held = (session.create_queue(n) for n in ("m-pull", "m-push",
                                                                          "m-held"))
            producer = session.create_producer()
            for _ in range(5):
                producer.send(session.create_text_message("p"), pulled)
            for _ in range(3):
                producer.send(session.create_text_message("l"), pushed)
            for _ in range(2):
                producer.send(session.create_text_message("h"), held)
            consumer = session.create_consumer(pulled)
            idle = session.create_consumer(held)
            conn.start()
            assert all(consumer.receive(5) is not None for _ in range(5))

            listening_session = conn.create_session()

            def on_message(message: Any) -> None:
                handled.append(message)
                if len(handled) == 3:
                    done.set()

            listening_session.create_consumer(pushed).set_message_listener(on_message)
            assert done.wait(10)
            assert wait_until(lambda: idle.flow_stats().buffered == 2, 10)
            limit = idle.flow_stats().limit

            def sums(name: str) -> dict[tuple[str, str], int]:
                return {(p.attributes["messaging.operation.name"],
                         p.attributes["messaging.destination.name"]): p.value
                        for p in _points(reader, name)}

            def counts(name: str) -> dict[tuple[str, str], int]:
                return {(p.attributes["messaging.operation.name"],
                         p.attributes.get("messaging.destination.name", "")): p.count
                        for p in _points(reader, name)}

            assert sums("messaging.client.sent.messages") == {
                ("send", "m-pull"): 5, ("send", "m-push"): 3, ("send", "m-held"): 2}
            assert sums("messaging.client.consumed.messages") == {
                ("receive", "m-pull"): 5, ("process", "m-push"): 3}
            durations = counts("messaging.client.operation.duration")
            assert durations[("send", "m-pull")] == 5
            assert durations[("receive", "m-pull")] == 5
            assert counts("messaging.process.duration") == {("process", "m-push"): 3}
            for point in _points(reader, "messaging.client.operation.duration"):
                assert point.sum >= 0 and point.attributes["messaging.system"] == "jmspy"

            def gauge(name: str, destination: str) -> int:
                (point,) = [p for p in _points(reader, name)
                            if p.attributes["messaging.destination.name"] == destination]
                return int(point.value)

            assert gauge("jmspy.consumer.flow.buffered", "m-held") == 2
            assert gauge("jmspy.consumer.flow.limit", "m-held") == limit > 0
            assert gauge("jmspy.consumer.flow.buffered", "m-pull") == 0
    finally:
        telemetry.uninstrument()
        meters.shutdown()


class _PoolListener:
    """A worker pool's listener class: records what it handled."""

    seen: list[str] = []

    def on_message(self, message: Any) -> None:
        self.seen.append(message.text)


def test_worker_pool_workers_run_in_process_spans(spans: InMemorySpanExporter) -> None:
    from jmspy.pool import WorkerPool

    url = _vm()
    _PoolListener.seen = []
    with ConnectionFactory(url).create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(session.create_queue("jobs"))
        for i in range(3):
            producer.send(session.create_text_message(str(i)))
        with WorkerPool(ConnectionFactory(url), "jobs", _PoolListener, max_pool_size=2):
            assert wait_until(lambda: len(named(spans, "process jobs")) == 3, 10)
    sends = {s.context.span_id: s for s in named(spans, "send jobs") if s.context}
    processes = named(spans, "process jobs")
    assert sorted(_PoolListener.seen) == ["0", "1", "2"]
    assert {p.parent.span_id for p in processes if p.parent} == set(sends)
    assert all(p.kind is SpanKind.CONSUMER for p in processes)


def test_no_op_providers_leave_the_connection_untraced() -> None:
    from opentelemetry import metrics, trace

    telemetry.instrument(tracer_provider=trace.NoOpTracerProvider(),
                         meter_provider=metrics.NoOpMeterProvider())
    try:
        with ConnectionFactory(_vm()).create_connection() as conn:
            assert conn._telemetry is None
            session = conn.create_session()
            queue = session.create_queue("quiet")
            consumer = session.create_consumer(queue)
            conn.start()
            session.create_producer(queue).send(session.create_text_message("x"))
            received = consumer.receive(5)
            assert received is not None and list(received.property_names()) == []
    finally:
        telemetry.uninstrument()


def test_the_asyncio_face_sends_and_receives_in_spans(spans: InMemorySpanExporter) -> None:
    import asyncio

    from jmspy.aio import AsyncConnectionFactory

    async def main() -> str | None:
        async with AsyncConnectionFactory(_vm()).create_connection() as conn:
            session = await conn.create_session()
            queue = session.create_queue("async-orders")
            producer = await session.create_producer(queue)
            consumer = await session.create_consumer(queue)
            conn.start()
            await producer.send(session.create_text_message("a"))
            received = await consumer.receive(timeout=10)
            return None if received is None else received.text

    assert asyncio.run(main()) == "a"
    (send,) = named(spans, "send async-orders")
    (receive,) = named(spans, "receive async-orders")
    assert send.kind is SpanKind.PRODUCER and receive.kind is SpanKind.CLIENT
    assert linked(send, receive)
