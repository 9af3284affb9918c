"""What the telemetry tests read back from OpenTelemetry's in-memory exporter (the
``spans`` fixture is in tests/conftest.py): spans by name, and the producer -> consumer
relation a traced message must carry (tests/test_telemetry.py, and the interop tests
over real brokers)."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["assert_child_and_linked", "linked", "named"]


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def linked(producer: ReadableSpan, consumer: ReadableSpan) -> bool:
    """Whether ``consumer`` carries a link to ``producer``'s span (same trace, same span)."""
    ctx = producer.get_span_context()
    assert ctx is not None
    return any(link.context.span_id == ctx.span_id and link.context.trace_id == ctx.trace_id
               for link in consumer.links)


def assert_child_and_linked(send: ReadableSpan, process: ReadableSpan) -> None:
    """``process`` is a child of the producer's ``send`` span, in its trace, and links to
    it: the trace context travelled in the message."""
    send_ctx = send.get_span_context()
    assert send_ctx is not None and process.parent is not None
    assert process.parent.span_id == send_ctx.span_id
    assert process.context is not None and process.context.trace_id == send_ctx.trace_id
    assert linked(send, process)
