"""A message made from a received one keeps its trace: the Spark connector's rows carry
the ``traceparent`` property to the sink, and the sink's send (traced or not) goes on
with the producer's trace instead of starting one of its own."""

from __future__ import annotations

import re
import uuid
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from span_support import linked, named

from jmspy import ConnectionFactory, Message
from jmspy.spark.rows import SCHEMA, row_of, to_message

#: the top-level column names of the Spark schema, in order
COLUMNS = re.findall(r"(?:^|, )(\w+) (?=[A-Z])", SCHEMA)


#: a span the application has open around the sink's send (a traced Spark task)
TASK = trace.SpanContext(trace_id=0x1234, span_id=0x5678, is_remote=False,
                         trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))


def _through_a_row(spans: InMemorySpanExporter, *, inside: bool) -> tuple[Any, ...]:
    """Send one message to q1; receive it, make a Spark row of it and a message of that
    row (as the source and the sink do), send that to q2 (inside the span :data:`TASK`
    when ``inside``), receive it. The spans and the message received from q2."""
    name = f"copy{uuid.uuid4().hex[:6]}"
    with ConnectionFactory(f"vm://{name}").create_connection() as conn:
        conn.start()
        session = conn.create_session()
        first, second = session.create_queue(f"{name}.in"), session.create_queue(f"{name}.out")
        session.create_producer(first).send(session.create_text_message("order 1"))
        received = session.create_consumer(first).receive(5)
        assert received is not None
        row = dict(zip(COLUMNS, row_of(received), strict=True))
        assert row["properties"]["traceparent"]  # the context rides in the row
        copy, options = to_message(session, row)
        producer = session.create_producer(second)
        if inside:
            with trace.use_span(trace.NonRecordingSpan(TASK)):
                producer.send(copy, **options)
        else:
            producer.send(copy, **options)
        last: Message | None = session.create_consumer(second).receive(5)
        assert last is not None
    (send_in,) = named(spans, f"send {name}.in")
    (send_out,) = named(spans, f"send {name}.out")
    (receive_out,) = named(spans, f"receive {name}.out")
    return send_in, send_out, receive_out, last


def test_an_untraced_copy_goes_on_as_a_child_of_the_first_send(
        spans: InMemorySpanExporter) -> None:
    send_in, send_out, receive_out, last = _through_a_row(spans, inside=False)
    first = send_in.get_span_context()
    assert send_out.parent is not None and send_out.parent.span_id == first.span_id
    assert send_out.get_span_context().trace_id == first.trace_id
    assert linked(send_in, send_out)
    # the copy carries the second send's context on: its consumer links to it
    assert linked(send_out, receive_out)
    assert last.get_string_property("traceparent").split("-")[2] == (
        f"{send_out.get_span_context().span_id:016x}")


def test_a_copy_sent_inside_a_span_is_its_child_and_links_the_first_send(
        spans: InMemorySpanExporter) -> None:
    send_in, send_out, _receive, _last = _through_a_row(spans, inside=True)
    assert send_out.parent is not None
    assert (send_out.parent.trace_id, send_out.parent.span_id) == (TASK.trace_id, TASK.span_id)
    assert linked(send_in, send_out)  # the first send's trace is linked, not lost
