"""OpenTelemetry traces and metrics for the client, to the messaging semantic conventions.

Optional (``pip install 'jmspy[otel]'``) and off unless asked for. Whether it is on is
decided once, when a connection is created (:func:`for_connection`): on if
:func:`instrument` was called, or if the application has itself imported OpenTelemetry
and configured a global tracer or meter provider. jmspy never imports ``opentelemetry``
on its own: the check reads ``sys.modules``, so an application without OpenTelemetry pays
no import and its connections keep ``_telemetry = None``, which is the one cached check
the send, receive, listener and settle paths make. A producer of an instrumented
connection is a :class:`TracedProducer`, so the plain producer's ``send()`` (a compiled
twin) is untouched when tracing is off.

What is recorded (see docs/observability.md):

- spans ``send {destination}`` (PRODUCER), ``receive {destination}`` (CLIENT),
  ``process {destination}`` (CONSUMER, around a listener) and ``settle [{destination}]``
  (CLIENT, around acknowledge and commit), with ``messaging.*`` and ``server.*``
  attributes;
- W3C trace context (``traceparent``, ``tracestate``) set as message properties by the
  send span, so the receiving side, in another process and over any transport that
  carries properties, links its span to the producer's (a process span is also its
  child);
- the counters ``messaging.client.sent.messages`` and
  ``messaging.client.consumed.messages``, the histograms
  ``messaging.client.operation.duration`` and ``messaging.process.duration`` (seconds),
  and the flow gauges ``jmspy.consumer.flow.*`` read from each consumer's ``flow_stats()``.
"""

from __future__ import annotations

import sys
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from .errors import JMSException
from .message import Message
from .producer import MessageProducer

if TYPE_CHECKING:
    from .completion import CompletionCallback
    from .destinations import Destination
    from .flow import FlowStats
    from .owners import ProducerSession
    from .transport import Transport

__all__ = ["Telemetry", "TracedListener", "TracedProducer", "for_connection", "instrument",
           "uninstrument"]

#: The W3C trace context fields carried as message properties.
CONTEXT_PROPERTIES = ("traceparent", "tracestate")
_SCOPE = "jmspy"

#: Providers given to :func:`instrument`: (tracer provider, meter provider), or None.
_explicit: tuple[Any, Any] | None = None


def instrument(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Trace and measure connections created from now on with these providers (None:
    the global ones of ``opentelemetry.trace`` / ``opentelemetry.metrics``)."""
    global _explicit
    if tracer_provider is None:
        from opentelemetry import trace

        tracer_provider = trace.get_tracer_provider()
    if meter_provider is None:
        from opentelemetry import metrics

        meter_provider = metrics.get_meter_provider()
    _explicit = (tracer_provider, meter_provider)


def uninstrument() -> None:
    """Connections created from now on are neither traced nor measured, unless a global
    provider is configured."""
    global _explicit
    _explicit = None


#: the API's providers that record nothing (an unconfigured global is a proxy of one)
_NO_OP = frozenset({"ProxyTracerProvider", "NoOpTracerProvider", "_ProxyMeterProvider",
                    "NoOpMeterProvider"})


def _recording(provider: Any) -> Any:
    """``provider``, or None if it is one that records nothing (so costs nothing)."""
    return None if provider is None or type(provider).__name__ in _NO_OP else provider


def _configured_globals() -> tuple[Any, Any]:
    """The global providers the application configured, without importing anything."""
    trace = sys.modules.get("opentelemetry.trace")
    metrics = sys.modules.get("opentelemetry.metrics")
    return (None if trace is None else trace.get_tracer_provider(),
            None if metrics is None else metrics.get_meter_provider())


#: ``messaging.system`` values, found as a word of a broker's self-description
_SYSTEMS = ("mosquitto", "emqx", "hivemq", "vernemq", "rabbitmq", "activemq", "artemis",
            "jmspy")


def _system_of(described: str) -> str:
    """The ``messaging.system`` value for a broker's self-description (MQTT's
    ``$SYS/broker/version``: "mosquitto version 2.0.11" -> "mosquitto"): a known name in
    it, else its first word in lower case, else ""."""
    text = described.strip().lower()
    for name in _SYSTEMS:
        if name in text:
            return name
    return text.split()[0] if text else ""


def for_connection(transport: Transport) -> Telemetry | None:
    """A new connection's telemetry, or None when nothing would record it (the usual
    case: no provider configured, or only no-op ones)."""
    tracer_provider, meter_provider = (_explicit if _explicit is not None
                                       else _configured_globals())
    tracer_provider, meter_provider = _recording(tracer_provider), _recording(meter_provider)
    if tracer_provider is None and meter_provider is None:
        return None
    return Telemetry(transport, tracer_provider, meter_provider)


class _Flowing(Protocol):
    """A consumer, as the flow gauges read it."""

    destination: Destination

    def flow_stats(self) -> FlowStats: ...


class Telemetry:
    """One connection's tracer, instruments and attributes."""

    def __init__(self, transport: Transport, tracer_provider: Any, meter_provider: Any) -> None:
        from opentelemetry import trace
        from opentelemetry.propagate import extract, inject

        self._trace = trace
        self._inject = inject
        self._extract = extract
        self._transport = transport
        self._system: str | None = None
        self.tracer = (trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
                       if tracer_provider is not None else None)
        self._consumers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.sent = self.consumed = self.duration = self.process_duration = None
        if meter_provider is not None:
            self._meters(meter_provider.get_meter(_SCOPE))

    def _meters(self, meter: Any) -> None:
        self.sent = meter.create_counter(
            "messaging.client.sent.messages", unit="{message}",
            description="Number of messages producers attempted to send to the broker.")
        self.consumed = meter.create_counter(
            "messaging.client.consumed.messages", unit="{message}",
            description="Number of messages delivered to the application.")
        self.duration = meter.create_histogram(
            "messaging.client.operation.duration", unit="s",
            description="Duration of a messaging operation initiated by a producer or "
                        "consumer client.")
        self.process_duration = meter.create_histogram(
            "messaging.process.duration", unit="s",
            description="Duration of processing operation (a message listener's call).")
        for field, what in (("limit", "effective flow limit"),
                            ("buffered", "messages buffered in the prefetch window"),
                            ("outstanding_credit", "credit granted and not yet used"),
                            ("batches_requested", "credit requests sent to the broker"),
                            ("pauses", "times delivery paused at the flow limit")):
            meter.create_observable_gauge(
                f"jmspy.consumer.flow.{field}", callbacks=[self._gauge(field)],
                unit="{message}" if field in ("limit", "buffered", "outstanding_credit")
                else "{event}", description=f"Per consumer: the {what}.")

    def _gauge(self, field: str) -> Callable[[Any], Iterator[Any]]:
        from opentelemetry.metrics import Observation

        def observe(options: Any) -> Iterator[Any]:
            for consumer in list(self._consumers):
                stats = consumer.flow_stats()
                yield Observation(getattr(stats, field), {
                    "messaging.destination.name": consumer.destination.name,
                    "jmspy.consumer.id": consumer.consumer_id,
                    "jmspy.consumer.flow.limited_by": stats.limited_by})
        return observe

    def add_consumer(self, consumer: _Flowing) -> None:
        """Observe ``consumer``'s flow window in the gauges (held weakly)."""
        self._consumers.add(consumer)

    def connected(self) -> None:
        """Learn ``messaging.system`` now that the transport is open, so the round trip an
        MQTT broker's identification costs is the connect's, not the first send span's."""
        try:
            self.system  # noqa: B018 - computed and cached by the property
        except JMSException:
            pass  # the connection went away: spans will say so themselves

    # -- attributes ---------------------------------------------------------------------
    @property
    def system(self) -> str:
        """``messaging.system``: the broker the transport identified."""
        if self._system is None:
            transport = self._transport
            module = type(transport).__module__
            profile = getattr(transport, "profile", None)
            family = getattr(profile, "family", None)
            if ".vm" in module:
                system = "jmspy"
            elif family and getattr(profile, "server", ""):
                system = str(family).lower()
            elif callable(identify := getattr(transport, "identify", None)):
                # MQTT names no server at CONNECT: the broker's $SYS/broker/version does
                # (transports/mqtt/identify.py), asked once; "mqtt" if it has none
                system = _system_of(identify()) or "mqtt"
            else:
                return "stomp" if ".stomp" in module else "jmspy"
            self._system = system
        return self._system

    def attributes(self, operation: str, kind: str, destination: Destination | None,
                   ) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "messaging.system": self.system,
            "messaging.operation.name": operation,
            "messaging.operation.type": kind,
        }
        if destination is not None:
            attrs["messaging.destination.name"] = destination.name
            if destination.kind.startswith("temp"):
                attrs["messaging.destination.temporary"] = True
        host = getattr(self._transport, "host", None)
        if isinstance(host, str):
            attrs["server.address"] = host
            port = getattr(self._transport, "port", None)
            if isinstance(port, int):
                attrs["server.port"] = port
        return attrs

    @staticmethod
    def _metric_attributes(attrs: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in attrs.items() if k in (
            "messaging.system", "messaging.operation.name", "messaging.destination.name",
            "messaging.consumer.group.name", "server.address", "server.port",
            "error.type")}

    @staticmethod
    def _message_attributes(attrs: dict[str, Any], message: Message) -> None:
        if message.message_id:
            attrs["messaging.message.id"] = message.message_id
        if message.correlation_id:
            attrs["messaging.message.conversation_id"] = message.correlation_id

    def _link(self, message: Message) -> tuple[Any, list[Any]]:
        """The producer's context carried by ``message``, and the links to it."""
        carrier = {}
        for name in CONTEXT_PROPERTIES:
            try:
                value = message.get_string_property(name)
            except JMSException:
                value = None
            if value:
                carrier[name] = value
        if not carrier:
            return None, []
        context = self._extract(carrier)
        span_context = self._trace.get_current_span(context).get_span_context()
        if not span_context.is_valid:
            return None, []
        return context, [self._trace.Link(span_context)]

    # -- the operations -----------------------------------------------------------------
    def send(self, producer: MessageProducer, message: Message, destination: Destination,
             send: Callable[[], None]) -> None:
        """Run ``send()`` inside a ``send`` span, the span's context set on ``message``."""
        attrs = self.attributes("send", "send", destination)
        start = time.perf_counter()
        tracer = self.tracer
        if tracer is None:
            self._sent(send, attrs, start)
            return
        # A message made from one received (a Spark row's properties, a copy in a
        # pipeline) may carry its producer's context: the send links to it, and is its
        # child when nothing else is current, so the trace goes on through the copy.
        carried, links = self._link(message)
        current = self._trace.get_current_span().get_span_context().is_valid
        with tracer.start_as_current_span(f"send {destination.name}",
                                          context=None if current else carried,
                                          kind=self._trace.SpanKind.PRODUCER,
                                          attributes=attrs, links=links) as span:
            carrier: dict[str, str] = {}
            self._inject(carrier)
            try:
                for name, value in carrier.items():
                    message.set_property(name, value)
            except JMSException:  # a received message, resent: its properties are frozen
                pass
            self._sent(send, attrs, start)
            if message.message_id:
                span.set_attribute("messaging.message.id", message.message_id)
            if message.correlation_id:
                span.set_attribute("messaging.message.conversation_id",
                                   message.correlation_id)

    def _sent(self, send: Callable[[], None], attrs: dict[str, Any], start: float) -> None:
        metric_attrs = self._metric_attributes(attrs)
        try:
            send()
        except Exception as exc:
            metric_attrs["error.type"] = type(exc).__qualname__
            raise
        finally:
            if self.sent is not None:
                self.sent.add(1, metric_attrs)
                assert self.duration is not None
                self.duration.record(time.perf_counter() - start, metric_attrs)

    def received(self, consumer: Any, message: Message, start_ns: int, start: float) -> None:
        """A ``receive`` span (from ``start_ns``) for ``message``, linked to its sender's."""
        attrs = self.attributes("receive", "receive", consumer.destination)
        group = getattr(consumer, "_telemetry_group", None)
        if group:
            attrs["messaging.consumer.group.name"] = group
        if self.consumed is not None:
            metric_attrs = self._metric_attributes(attrs)
            self.consumed.add(1, metric_attrs)
            assert self.duration is not None
            self.duration.record(time.perf_counter() - start, metric_attrs)
        if self.tracer is None:
            return
        self._message_attributes(attrs, message)
        _, links = self._link(message)
        span = self.tracer.start_span(f"receive {consumer.destination.name}",
                                      kind=self._trace.SpanKind.CLIENT, attributes=attrs,
                                      links=links, start_time=start_ns)
        span.end()

    def process(self, consumer: Any, message: Message, call: Callable[[Message], Any]) -> None:
        """Call a listener inside a ``process`` span, a child of (and linked to) the
        sender's span."""
        attrs = self.attributes("process", "process", consumer.destination)
        group = getattr(consumer, "_telemetry_group", None)
        if group:
            attrs["messaging.consumer.group.name"] = group
        metric_attrs = self._metric_attributes(attrs)
        start = time.perf_counter()
        try:
            if self.tracer is None:
                call(message)
            else:
                self._message_attributes(attrs, message)
                context, links = self._link(message)
                with self.tracer.start_as_current_span(
                        f"process {consumer.destination.name}", context=context,
                        kind=self._trace.SpanKind.CONSUMER, attributes=attrs, links=links):
                    call(message)
        except Exception as exc:
            metric_attrs["error.type"] = type(exc).__qualname__
            raise
        finally:
            if self.consumed is not None:
                self.consumed.add(1, metric_attrs)
                assert self.process_duration is not None
                self.process_duration.record(time.perf_counter() - start, metric_attrs)

    @contextmanager
    def settle(self, operation: str, destinations: list[Destination]) -> Iterator[None]:
        """A ``settle`` span around an acknowledge or commit (named for the destination
        when the session has one)."""
        destination = destinations[0] if len(set(destinations)) == 1 else None
        attrs = self.attributes(operation, "settle", destination)
        start = time.perf_counter()
        metric_attrs = self._metric_attributes(attrs)
        try:
            if self.tracer is None:
                yield
            else:
                name = "settle" if destination is None else f"settle {destination.name}"
                with self.tracer.start_as_current_span(
                        name, kind=self._trace.SpanKind.CLIENT, attributes=attrs):
                    yield
        except Exception as exc:
            metric_attrs["error.type"] = type(exc).__qualname__
            raise
        finally:
            if self.duration is not None:
                self.duration.record(time.perf_counter() - start, metric_attrs)

    def settled_by_message(self, acknowledge: Callable[[Message], None]
                           ) -> Callable[[Message], None]:
        """``message.acknowledge()`` inside a ``settle`` span named for the message's
        destination (what the session's acknowledgement runs when instrumented)."""
        def traced(message: Message) -> None:
            destination = message.destination
            with self.settle("ack", [] if destination is None else [destination]):
                acknowledge(message)

        return traced


class TracedListener:
    """A message listener run inside a ``process`` span (what a consumer of an
    instrumented connection holds instead of the application's listener)."""

    __slots__ = ("_call", "_consumer", "_telemetry", "listener")

    def __init__(self, telemetry: Telemetry, consumer: object, listener: Any) -> None:
        self.listener = listener
        self._telemetry = telemetry
        self._consumer = consumer
        on_message = getattr(listener, "on_message", None)
        self._call: Callable[[Message], Any] = on_message if on_message is not None \
            else listener

    def __call__(self, message: Message) -> None:
        self._telemetry.process(self._consumer, message, self._call)

    def __repr__(self) -> str:
        return repr(self.listener)


class TracedProducer(MessageProducer):
    """A producer of an instrumented connection: each send in a ``send`` span."""

    def __init__(self, session: ProducerSession, destination: Destination | None,
                 telemetry: Telemetry) -> None:
        super().__init__(session, destination)
        self._telemetry = telemetry

    def send(
        self,
        message: Message,
        destination: Destination | None = None,
        *,
        delivery_mode: int | None = None,
        priority: int | None = None,
        time_to_live: float | None = None,
        delivery_delay: float | None = None,
        completion_listener: CompletionCallback | None = None,
    ) -> None:
        target = self.destination if destination is None else destination
        if target is None or not isinstance(message, Message):
            super().send(message, destination, delivery_mode=delivery_mode,
                         priority=priority, time_to_live=time_to_live,
                         delivery_delay=delivery_delay,
                         completion_listener=completion_listener)
            return

        def send() -> None:
            MessageProducer.send(self, message, destination, delivery_mode=delivery_mode,
                                 priority=priority, time_to_live=time_to_live,
                                 delivery_delay=delivery_delay,
                                 completion_listener=completion_listener)
        self._telemetry.send(self, message, target, send)
