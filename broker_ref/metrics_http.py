"""``/metrics`` in the Prometheus text format: ``jmspy broker --metrics-port``.

Served by ``prometheus_client`` (``pip install 'jmspy[metrics]'``) from its own thread:
a scrape never waits behind a busy event loop to be accepted, and the broker's loop runs
no HTTP code. The counters themselves are read on the broker's loop (the one thread that
changes them): :class:`BrokerCollector` hands the loop a snapshot request per scrape and
waits for it, so a scrape sees one consistent moment of every destination.

Names and labels follow the RabbitMQ and Artemis exporters' shape: one family per
counter, a ``destination`` and a ``kind`` (``queue``/``topic``) label per series,
``_total`` for counters, ``_bytes`` for sizes.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator
from typing import Any

from .config_error import ConfigError
from .core import Broker

__all__ = ["BrokerCollector", "MetricsServer", "start_metrics_server"]

#: (metric suffix, DestinationStats field, help, is a counter)
DESTINATION_METRICS: tuple[tuple[str, str, str, bool], ...] = (
    ("messages", "message_count",
     "Messages held and not yet acknowledged (ready, delivering and scheduled)", False),
    ("messages_ready", "in_memory_count", "Messages held in RAM", False),
    ("messages_paged", "paged_count", "Messages paged out of RAM", False),
    ("messages_delivering", "delivering_count",
     "Messages delivered to consumers and not yet acknowledged", False),
    ("messages_scheduled", "scheduled_count", "Messages waiting for their delivery time",
     False),
    ("messages_stored", "stored_count", "Persistent messages the store holds", False),
    ("consumers", "consumer_count", "Consumers attached", False),
    ("subscriptions", "subscription_count", "Subscriptions (topics)", False),
    ("producers_blocked", "blocked_producers",
     "Producers waiting because the destination or the broker is full", False),
    ("memory_bytes", "memory_usage", "Bytes its pending messages take in RAM", False),
    ("memory_limit_bytes", "memory_limit", "Its memory-limit (0: only the broker's)", False),
    ("messages_enqueued", "enqueued", "Messages sent to it", True),
    ("messages_dequeued", "dequeued", "Messages acknowledged", True),
    ("messages_expired", "expired", "Messages that expired", True),
    ("messages_dead_lettered", "dead_lettered", "Messages moved to a dead-letter queue",
     True),
    ("messages_discarded", "discarded",
     "Messages a slow subscriber lost to its pending-message-limit", True),
    ("messages_duplicates_dropped", "duplicates_dropped",
     "Messages dropped as duplicates", True),
)

#: (metric name, Broker.usage() key, help)
BROKER_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("jmspy_broker_memory_bytes", "memoryUsed", "RAM pending messages take"),
    ("jmspy_broker_memory_limit_bytes", "memoryLimit", "The broker's memory-limit"),
    ("jmspy_broker_store_bytes", "storeBytes", "What the store takes on disk"),
    ("jmspy_broker_store_limit_bytes", "storeLimit", "The broker's store-limit"),
    ("jmspy_broker_temp_bytes", "tempUsed", "What the temp spool holds"),
    ("jmspy_broker_temp_limit_bytes", "tempLimit", "The broker's temp-limit"),
    ("jmspy_broker_producers_blocked", "blockedProducers", "Producers waiting for room"),
)


class BrokerCollector:
    """A ``prometheus_client`` collector reading one broker on its event loop."""

    def __init__(self, broker: Broker, loop: asyncio.AbstractEventLoop | None,
                 timeout: float = 10.0) -> None:
        """``loop``: the broker's loop, when scrapes come from another thread; None when
        they run on that loop already (the aiohttp listener, :mod:`.http`)."""
        self._broker = broker
        self._loop = loop
        self._timeout = timeout

    def _read(self) -> tuple[list[Any], dict[str, Any], int]:
        broker = self._broker
        return broker.all_stats(), broker.usage(), len(broker.connections())

    async def _snapshot(self) -> tuple[list[Any], dict[str, Any], int]:
        return self._read()

    def collect(self) -> Iterator[Any]:
        core: Any = importlib.import_module("prometheus_client.core")
        if self._loop is None:
            stats, usage, connections = self._read()
        else:
            stats, usage, connections = asyncio.run_coroutine_threadsafe(
                self._snapshot(), self._loop).result(self._timeout)
        labels = ["destination", "kind"]
        for suffix, field, text, counter in DESTINATION_METRICS:
            name = f"jmspy_destination_{suffix}"
            family = (core.CounterMetricFamily(name, text, labels=labels) if counter
                      else core.GaugeMetricFamily(name, text, labels=labels))
            for s in stats:
                family.add_metric([s.name, s.kind.name.lower()], getattr(s, field))
            yield family
        for name, key, text in BROKER_GAUGES:
            yield core.GaugeMetricFamily(name, text, value=usage.get(key) or 0)
        yield core.GaugeMetricFamily("jmspy_broker_connections",
                                     "Connections open (logged in)", value=connections)
        refused = core.CounterMetricFamily(
            "jmspy_broker_connections_refused",
            "Connections turned away, by reason", labels=["reason"])
        closed = core.CounterMetricFamily(
            "jmspy_broker_connections_closed",
            "Connections the broker closed, by reason", labels=["reason"])
        for key, value in usage.items():
            if key.startswith("connectionsRefused") and key != "connectionsRefused":
                refused.add_metric([_reason(key, "connectionsRefused")], value)
            elif key.startswith("connectionsClosed"):
                closed.add_metric([_reason(key, "connectionsClosed")], value)
        yield refused
        yield closed


def _reason(key: str, prefix: str) -> str:
    """``connectionsRefusedMaxConnections`` -> ``max_connections``."""
    rest = key.removeprefix(prefix)
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in rest).lstrip("_")


class MetricsServer:
    """The running ``/metrics`` listener (its address, and how to stop it)."""

    def __init__(self, server: Any, thread: Any) -> None:
        self._server = server
        self._thread = thread
        self.host: str = server.server_address[0]
        self.port: int = server.server_address[1]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def start_metrics_server(broker: Broker, loop: asyncio.AbstractEventLoop, host: str,
                         port: int) -> MetricsServer:
    """Serve ``broker``'s metrics on ``http://host:port/metrics`` (port 0: a free one)."""
    try:
        client: Any = importlib.import_module("prometheus_client")
        registry_mod: Any = importlib.import_module("prometheus_client.registry")
    except ImportError:
        raise ConfigError("--metrics-port (or [broker] metrics_port) needs prometheus_client: "
                          "pip install 'jmspy[metrics]'") from None
    registry = registry_mod.CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, loop))
    try:
        server, thread = client.start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc.strerror}; pick "
                          "another --metrics-port (0 picks a free one)") from exc
    return MetricsServer(server, thread)
