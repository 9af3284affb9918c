"""OpenTelemetry's producer->consumer link across a real Mosquitto 2 (``mqtt://``, MQTT
5): the W3C trace context travels as MQTT 5 user properties (see tests/test_telemetry.py
for ``vm://`` and ``stomp://``)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind
from span_support import assert_child_and_linked, named

from jmspy import ConnectionFactory


def _linked_spans(spans: InMemorySpanExporter, url: str, name: str, topic: bool,
                  correlation_id: str | None = None) -> tuple[Any, Any]:
    """Send one message to ``name`` (a topic or a queue) on one connection, hear it on a
    listener of another: the (send, process) spans, the process span linked to send."""
    got = threading.Event()
    with ConnectionFactory(url).create_connection() as consuming, \
            ConnectionFactory(url).create_connection() as producing:
        session = consuming.create_session()
        dest = session.create_topic(name) if topic else session.create_queue(name)
        session.create_consumer(dest).set_message_listener(lambda m: got.set())
        consuming.start()
        psession = producing.create_session()
        message = psession.create_text_message("x")
        if correlation_id is not None:
            message.correlation_id = correlation_id
        psession.create_producer(dest).send(message)
        assert got.wait(30)
    (send,) = named(spans, f"send {name}")
    (process,) = named(spans, f"process {name}")
    assert_child_and_linked(send, process)
    return send, process


def test_the_link_crosses_mosquitto_over_mqtt5(mosquitto: Any,
                                                 spans: InMemorySpanExporter) -> None:
    url = f"mqtt://{mosquitto.host}:{mosquitto.mqtt_port}"
    send, process = _linked_spans(spans, url, f"otel/{uuid.uuid4().hex[:8]}", topic=True)
    assert process.kind is SpanKind.CONSUMER
    for span in (send, process):
        attrs = dict(span.attributes or {})
        assert attrs["messaging.system"] == "mosquitto"  # its $SYS/broker/version
        assert attrs["server.port"] == mosquitto.mqtt_port


@pytest.mark.parametrize(("fixture", "system"), [("activemq", "activemq"),
                                                 ("rabbitmq", "rabbitmq")])
def test_the_link_crosses_activemq_and_rabbitmq_over_stomp(
        request: pytest.FixtureRequest, spans: InMemorySpanExporter, fixture: str,
        system: str) -> None:
    broker = request.getfixturevalue(fixture)
    url = f"stomp://{broker.host}:{broker.stomp_port}"
    send, process = _linked_spans(spans, url, f"otel.{uuid.uuid4().hex[:8]}", topic=False,
                                  correlation_id="conv-1")
    for span in (send, process):
        attrs = dict(span.attributes or {})
        assert attrs["messaging.system"] == system  # from CONNECTED's server header
        assert attrs["messaging.message.conversation_id"] == "conv-1"
        assert attrs["server.port"] == broker.stomp_port
