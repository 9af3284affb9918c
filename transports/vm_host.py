"""The in-process brokers behind ``vm://NAME``: each core with its lock, timer thread and
STOMP connectors, and the registry of them by name.

The broker core is single-threaded by design, so :class:`BrokerHost` serialises every
call with one lock and runs a timer thread for scheduled delivery and expiry. Brokers are
registered by name: ``vm://embedded`` creates one on first use; tests and applications
that need settings start their own with :func:`start_broker`. Other processes reach an
in-process broker through a STOMP connector (:meth:`BrokerHost.add_connector`,
ActiveMQ's ``addConnector``). The connections themselves are :mod:`.vm`'s.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import SplitResult, urlsplit

from jmspy import errors
from jmspy.broker_ref.config import parse_size
from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.core.api import DestinationKind
from jmspy.broker_ref.data_dir import DataDirectory
from jmspy.broker_ref.store.sqlite_store import StoreError

if TYPE_CHECKING:
    import ssl

    from jmspy.broker_ref.protocols.mqtt.connector import MqttConnector
    from jmspy.broker_ref.protocols.mqtt.hub import MqttHub
    from jmspy.broker_ref.protocols.stomp.connector import StompConnector

__all__ = ["BrokerHost", "HostedTransport", "get_broker", "start_broker", "stop_broker"]


class HostedTransport(Protocol):
    """What :meth:`BrokerHost.stop` tells each open ``vm://`` connection."""

    def server_closed(self) -> None:
        """Lock held: the broker side of the connection is closed."""

    def broker_stopped(self) -> None:
        """Outside the lock: the broker is gone (interrupted, or reconnecting)."""


#: Broker options that are sizes (``start_broker(memory_limit="16 MB")``).
_SIZES = ("memory_limit", "store_limit", "temp_limit")

_registry_lock = threading.Lock()
_hosts: dict[str, BrokerHost] = {}


class BrokerHost:
    """One in-process broker core: a lock around every call, and a timer thread."""

    def __init__(self, name: str, broker: Broker) -> None:
        self.name = name
        self.broker = broker
        #: re-entrant for the STOMP connectors, whose loop callbacks nest (.connector)
        self.lock = threading.RLock()
        self._timer_cond = threading.Condition(self.lock)
        self._running = True
        #: the locked data directory of a persistent broker (start_broker(data_dir=...))
        self.data_dir: DataDirectory | None = None
        #: open vm connections, told by stop() that the broker went away
        self.transports: set[HostedTransport] = set()
        self._connectors: list[StompConnector | MqttConnector] = []
        #: the MQTT state every MQTT connector of this broker shares (retained messages,
        #: sessions, wills), as one Mosquitto's listeners do; made by the first one
        self._mqtt_hub: MqttHub | None = None
        self._timer = threading.Thread(
            target=self._run_timers, name=f"jmspy-vm-timers-{name}", daemon=True
        )
        self._timer.start()

    def poke_timers(self) -> None:
        """A message with a deadline arrived: let the timer thread re-plan (lock held)."""
        self._timer_cond.notify()

    def _run_timers(self) -> None:
        with self.lock:
            while self._running:
                self.broker.process_timers()
                deadline = self.broker.next_deadline()
                wait = 0.5
                if deadline is not None:  # in the broker's clock (a test's may be fake)
                    wait = min(wait, max(0.0, (deadline - self.broker.now()) / 1000.0))
                self._timer_cond.wait(wait)

    def stats(self, name: str, kind: str = "queue") -> dict[str, Any]:
        """Counters of one destination under their JMX-style names."""
        with self.lock:
            return self.broker.stats(name, DestinationKind(kind)).as_dict()

    def all_stats(self) -> list[dict[str, Any]]:
        with self.lock:
            return [s.as_dict() for s in self.broker.all_stats()]

    def usage(self) -> dict[str, Any]:
        """Broker-wide resources (what ``jmspy stat``'s first line shows): memory, store
        and temp use against their limits, and the producers flow control holds."""
        with self.lock:
            return self.broker.usage()

    @property
    def connectors(self) -> list[str]:
        """The URLs other processes reach this broker at (:meth:`add_connector`)."""
        with self.lock:
            return [c.url for c in self._connectors]

    def add_connector(self, url: str = "stomp://127.0.0.1:0", *,
                      ssl_context: ssl.SSLContext | None = None,
                      user_from_cert: str | None = None) -> str:
        """Serve this broker over STOMP (or, with ``mqtt://HOST:PORT``, MQTT 3.1.1 and 5)
        to other processes as well; the URL they connect to (port 0 in ``url``: a free
        port, named in the answer).

        ``stomp+ssl://HOST:PORT`` (or ``stomps://``) serves STOMP over TLS with
        ``ssl_context``, a server-side context holding the broker's certificate and key
        (``ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)`` with ``load_cert_chain``; with
        ``verify_mode`` and ``load_verify_locations`` for client certificates).
        ``user_from_cert`` ("CN", "emailAddress", ...): a client certificate's subject
        field logs that user in without a password (the user must be in the broker's
        security policy).

        Like ActiveMQ's ``BrokerService.addConnector``: the application keeps its
        ``vm://`` connections, and a Spark job, a ``jmspy stat`` or any STOMP client
        connects to the returned ``stomp://`` URL. The broker's security settings apply
        to those logins. The connectors close when the broker is stopped."""
        from jmspy.broker_ref.protocols.stomp.connector import (
            TLS_SCHEMES,
            StompConnector,
            connector_tls,
        )

        parts = urlsplit(url)
        if parts.scheme.lower() in ("mqtt", "mqtts", "mqtt+ssl"):
            return self._add_mqtt_connector(url, parts, ssl_context, user_from_cert)
        try:
            port = parts.port
        except ValueError:
            port = -1
        scheme = parts.scheme.lower()
        if parts.query or parts.fragment:
            raise errors.InvalidConfigurationException(
                f"connector {url!r}: a connector takes no URL options "
                f"({parts.query or parts.fragment!r}); its settings are this call's "
                "arguments (ssl_context=, user_from_cert=) and the broker's config")
        if (scheme not in ("stomp", *TLS_SCHEMES) or port is None or port < 0
                or parts.path.strip("/")):
            raise errors.InvalidConfigurationException(
                f"connector {url!r}: give stomp://HOST:PORT or stomp+ssl://HOST:PORT (port 0 "
                "picks a free one), e.g. stomp://127.0.0.1:61613, or mqtt://HOST:PORT "
                "(mqtts:// over TLS) for MQTT 3.1.1 and 5")
        tls = connector_tls(url, scheme, ssl_context, user_from_cert)
        host = parts.hostname or "127.0.0.1"
        connector = StompConnector(self.broker, self.lock, name=self.name)
        return self._listening(url, connector, host, port,
                               lambda: connector.start(host, port, tls=tls))

    def _listening(self, url: str, connector: StompConnector | MqttConnector, host: str,
                   port: int, start: Callable[[], object]) -> str:
        """Start ``connector`` (``start()``), keep it to stop with the broker; its URL.
        A port that cannot be bound is the caller's configuration mistake, said so."""
        try:
            start()
        except OSError as exc:
            raise errors.InvalidConfigurationException(
                f"connector {url!r}: cannot listen on {host}:{port}: {exc.strerror or exc}; "
                "pick another port (0 picks a free one)") from exc
        with self.lock:
            self._connectors.append(connector)
        return connector.url

    def _add_mqtt_connector(self, url: str, parts: SplitResult,
                            ssl_context: ssl.SSLContext | None,
                            user_from_cert: str | None) -> str:
        """``mqtt://HOST:PORT``: serve this broker over MQTT 3.1.1 and 5 as well
        (``mqtts://`` or ``mqtt+ssl://``: over TLS, with ``ssl_context``)."""
        from jmspy.broker_ref.protocols.mqtt.connector import MqttConnector
        from jmspy.broker_ref.protocols.mqtt.hub import MqttHub
        from jmspy.broker_ref.tls_config import CERT_FIELDS

        try:
            port = parts.port
        except ValueError:
            port = -1
        if (port is None or port < 0 or parts.path.strip("/") or parts.query
                or parts.fragment):
            raise errors.InvalidConfigurationException(
                f"connector {url!r}: give mqtt://HOST:PORT or mqtts://HOST:PORT (port 0 "
                "picks a free one), e.g. mqtt://127.0.0.1:1883, without options")
        over_tls = parts.scheme.lower() != "mqtt"
        if over_tls and ssl_context is None:
            raise errors.InvalidConfigurationException(
                f"connector {url!r}: MQTT over TLS needs ssl_context=, a server-side "
                "ssl.SSLContext holding the broker's certificate and key")
        if not over_tls and ssl_context is not None:
            raise errors.InvalidConfigurationException(
                f"connector {url!r}: ssl_context= is for mqtts:// connectors; use "
                "mqtts://HOST:PORT to serve MQTT over TLS")
        if user_from_cert is not None and not over_tls:
            raise errors.InvalidConfigurationException(
                f"connector {url!r}: user_from_cert= reads client certificates, which "
                "only mqtts:// connectors see; use mqtts://HOST:PORT with ssl_context=")
        if user_from_cert is not None and user_from_cert not in CERT_FIELDS:
            raise errors.InvalidConfigurationException(
                f"connector {url!r}: user_from_cert={user_from_cert!r} is not a subject field "
                f"the broker reads; use one of {', '.join(CERT_FIELDS)}")
        host = parts.hostname or "127.0.0.1"
        with self.lock:
            if self._mqtt_hub is None:
                self._mqtt_hub = MqttHub(self.broker)
            hub = self._mqtt_hub
        connector = MqttConnector(self.broker, self.lock, name=self.name, hub=hub)
        return self._listening(url, connector, host, port,
                               lambda: connector.start(host, port, ssl_context=ssl_context,
                                                       user_from_cert=user_from_cert))

    def stop(self) -> None:
        """Close the broker. Its connectors close first (their STOMP connections'
        unacknowledged messages go back), then each vm connection's server side (its
        unacknowledged deliveries go back, counted, to a store if there is one), then the
        connection hears CONNECTION_INTERRUPTED or CONNECTION_LOST outside the lock."""
        with self.lock:
            connectors, self._connectors = self._connectors, []
        for connector in connectors:  # without the lock: their loops take it to close
            connector.stop()
        with self.lock:
            self._running = False
            self._timer_cond.notify()
            stranded, self.transports = self.transports, set()
            for transport in stranded:
                transport.server_closed()
            self.broker.close()
            if self.data_dir is not None:
                self.data_dir.release()
        if self._timer is not threading.current_thread():
            self._timer.join(5.0)
        for transport in stranded:
            transport.broker_stopped()


def start_broker(name: str = "embedded", *, data_dir: str | os.PathLike[str] | None = None,
                 **broker_options: Any) -> BrokerHost:
    """Start a named in-process broker (``vm://NAME``) with core options (settings...).

    The ``[system-usage]`` limits are keyword arguments too, the sizes in bytes or as in
    the config file: ``memory_limit="16 MB"``, ``store_limit``, ``temp_limit``,
    ``send_fail_if_no_space=True``, ``send_fail_if_no_space_after_timeout=500`` (ms).

    ``data_dir``: keep persistent messages, acks and durable subscriptions there (as
    ``jmspy broker --data-dir``), each operation durable when its call returns; they are
    recovered when a broker starts on the directory again. One broker per directory."""
    with _registry_lock:
        if name in _hosts:
            raise errors.IllegalStateException(
                f"an in-process broker named {name!r} is already running; stop_broker({name!r}) "
                "first or pick another name"
            )
        for key in _SIZES:  # sizes as in the config file: "16 MB", "512 KB", or bytes
            value = broker_options.get(key)
            if isinstance(value, str):
                broker_options[key] = parse_size(value, f"start_broker({key}={value!r})")
        data = None
        if data_dir is not None:
            try:
                data = DataDirectory(data_dir, group_commit=False)
            except StoreError as exc:
                raise errors.InvalidConfigurationException(str(exc)) from exc
            broker_options["store"] = data.store
            broker_options.setdefault("spool_dir", data.spool_dir)
        try:
            host = BrokerHost(name, Broker(name=name, **broker_options))
        except BaseException as exc:
            if data is not None:
                data.store.close()
                data.release()
            if isinstance(exc, ValueError):  # a bad limit or setting: say which
                raise errors.InvalidConfigurationException(
                    f"start_broker({name!r}): {exc}") from exc
            raise
        host.data_dir = data
        _hosts[name] = host
        return host


def get_broker(name: str = "embedded", *, create: bool = True) -> BrokerHost:
    """The running broker ``vm://NAME`` (started with defaults when ``create``)."""
    with _registry_lock:
        host = _hosts.get(name)
        if host is None:
            if not create:
                raise errors.InvalidConfigurationException(
                    f"no in-process broker named {name!r} is running (vm://{name}?create=false); "
                    "start it with jmspy.transports.vm.start_broker() or drop create=false"
                )
            host = BrokerHost(name, Broker(name=name))
            _hosts[name] = host
        return host


def stop_broker(name: str = "embedded") -> None:
    with _registry_lock:
        host = _hosts.pop(name, None)
    if host is not None:
        host.stop()
