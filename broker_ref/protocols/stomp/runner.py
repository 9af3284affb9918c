"""Run a STOMP broker until SIGINT/SIGTERM: what ``jmspy broker`` does."""

from __future__ import annotations

import asyncio
import importlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...config import BrokerConfig, ConfigError
from ...core import Broker
from ...core.throttle import ThrottleSettings
from ...data_dir import DataDirectory
from ...metrics_http import start_metrics_server
from ...store.sqlite_store import StoreError
from ...tls_config import TlsConfig, server_context
from .server import ConnectionLimits, StompServer
from .tls import TlsListener

if TYPE_CHECKING:
    from ..mqtt.server import MqttServer

__all__ = ["StoreError", "loop_factory", "run_broker", "serve"]


async def serve(
    config: BrokerConfig,
    stop: asyncio.Event,
    on_ready: Callable[[str, int], None] | None = None,
    on_tls_ready: Callable[[str, int], None] | None = None,
    on_metrics_ready: Callable[[str, int], None] | None = None,
    on_mqtt_ready: Callable[[str, int, bool], None] | None = None,
) -> None:
    """Serve until ``stop`` is set, then close listeners, connections and the broker.

    ``on_ready`` hears the plain listener's address, ``on_tls_ready`` the TLS one's
    (``[broker.tls]``); with ``only = true`` there is no plain listener, and ``on_ready``
    hears the TLS address too; ``on_metrics_ready`` the ``/metrics`` one's
    (``metrics_port``). The TLS files are read before anything listens: a bad
    certificate stops the start with a :class:`ConfigError` naming the file."""
    from jmspy.stomp_frames import CodecLimits

    tls = _tls_listener(config)
    data = DataDirectory(config.data_dir) if config.data_dir is not None else None
    try:
        broker = Broker(**config.broker_kwargs(),
                        store=data.store if data is not None else None,
                        spool_dir=data.spool_dir if data is not None else None)
    except BaseException:
        if data is not None:
            data.store.close()
            data.release()
        raise
    server = StompServer(
        broker,
        limits=CodecLimits(
            max_frame_bytes=config.max_frame_bytes,
            max_headers=config.max_headers,
            max_header_bytes=config.max_header_bytes,
        ),
        heartbeat_ms=config.heartbeat_ms,
        idle_spin_us=config.idle_spin_us,
        connection_limits=ConnectionLimits(
            connect_timeout=config.connect_timeout,
            max_connections=config.max_connections,
            max_connections_per_address=config.max_connections_per_address,
            idle_timeout=config.idle_timeout,
            input_budget=config.input_budget,
            throttle=ThrottleSettings(
                window_ms=config.login_window_ms,
                delay_after=config.login_delay_after,
                delay_ms=config.login_delay_ms,
                refuse_after=config.login_refuse_after,
                address_refuse_after=config.login_address_refuse_after,
            ),
        ),
    )
    try:
        if tls is None or not config.tls.only:
            host, port = await server.start(config.host, config.port)
        if tls is not None:
            try:
                tls_host, tls_port = await server.start(config.host, config.tls.port, tls=tls)
            except OSError as exc:
                raise ConfigError(f"cannot listen for TLS on {config.host}:{config.tls.port}: "
                                  f"{exc.strerror}; pick another [broker.tls] port or "
                                  "--tls-port (0 picks a free one)") from exc
            if config.tls.only:
                host, port = tls_host, tls_port
    except BaseException:
        await server.stop()
        broker.close()
        if data is not None:
            data.release()
        raise
    server.on_failed = stop.set  # an unusable store: stop for real, then say why
    metrics = None
    mqtt: MqttServer | None = None
    try:
        if on_ready is not None:
            on_ready(host, port)
        if config.mqtt_port is not None or config.mqtt_tls_port is not None:
            mqtt = await _mqtt(config, broker, server, on_mqtt_ready)
        if tls is not None and on_tls_ready is not None:
            on_tls_ready(tls_host, tls_port)
        if config.metrics_port is not None:
            metrics = await _http_listener(config, broker, server, mqtt)
            if on_metrics_ready is not None:
                on_metrics_ready(metrics.host, metrics.port)
        await stop.wait()
    finally:
        if metrics is not None:
            await metrics.stop()
        if mqtt is not None:
            await mqtt.stop()
        await server.stop()  # closes the broker, and so the store
        if data is not None:
            data.release()
    if server.failed is not None:
        raise StoreError(f"the broker stopped: {server.failed}")


class _Listener(Protocol):
    host: str
    port: int

    async def stop(self) -> None: ...


class _ThreadListener:
    """prometheus_client's own server (no aiohttp installed): /metrics only."""

    def __init__(self, config: BrokerConfig, broker: Broker) -> None:
        self._server = start_metrics_server(broker, asyncio.get_running_loop(),
                                            config.http_host, config.metrics_port or 0)
        self.host, self.port = self._server.host, self._server.port

    async def stop(self) -> None:
        await asyncio.to_thread(self._server.stop)


async def _http_listener(config: BrokerConfig, broker: Broker, server: StompServer,
                         mqtt: MqttServer | None) -> _Listener:
    """/metrics and the management API (aiohttp, :mod:`...http`); without aiohttp
    installed, /metrics alone from prometheus_client's thread -- unless security is on,
    which that server cannot check (it would serve /metrics to anyone)."""
    try:
        importlib.import_module("aiohttp")
    except ImportError:
        if broker.security is not None and broker.security.enabled and config.metrics_auth:
            raise ConfigError("with [security] on, /metrics and the management API need "
                              "aiohttp to check credentials: pip install 'jmspy[http]' (or "
                              "set [broker.http] metrics-auth = false to serve /metrics "
                              "to anyone)") from None
        return _ThreadListener(config, broker)
    from ...http.app import start_http_server

    return await start_http_server(broker, config.http_host, config.metrics_port or 0,
                                   core_lock=server.core_lock,
                                   close_connection=lambda core, reason: (
                                       server.close_connection(core, reason) or (
                                           mqtt is not None
                                           and mqtt.close_connection(core, reason))),
                                   accepted=lambda: len(server.connections),
                                   metrics_auth=config.metrics_auth,
                                   throttle=server.throttle)


async def _mqtt(config: BrokerConfig, broker: Broker, stomp: StompServer,
                on_ready: Callable[[str, int, bool], None] | None) -> MqttServer:
    """The MQTT listeners: plain on [broker.mqtt] port, over TLS on its tls-port (with
    [broker.tls]'s certificate and client-certificate rules, identity-as-user too);
    [limits] as on STOMP, and STOMP's logins (one failed-login throttle for both)."""
    from ..mqtt.server import MqttServer

    if config.mqtt_tls_port is not None and config.tls is None:
        raise ConfigError("[broker.mqtt] tls-port (--mqtt-tls-port) needs the certificate "
                          "of [broker.tls]: add that table with cert and key")
    mqtt = MqttServer(broker, max_packet_bytes=config.mqtt_max_packet_bytes,
                      max_keep_alive=config.mqtt_max_keep_alive,
                      limits=stomp.connection_limits, logins=stomp.logins,
                      durable=stomp.make_durable)
    for port, over_tls in ((config.mqtt_port, False), (config.mqtt_tls_port, True)):
        if port is None:
            continue
        tls = _tls_listener(config) if over_tls else None  # the certificate read when asked
        try:
            bound = await mqtt.start(config.host, port, tls=tls)
        except OSError as exc:
            await mqtt.stop()
            which = "tls-port or --mqtt-tls-port" if tls else "port or --mqtt-port"
            raise ConfigError(f"cannot listen for MQTT{' over TLS' if tls else ''} on "
                              f"{config.host}:{port}: {exc.strerror}; pick another "
                              f"[broker.mqtt] {which} (0 picks a free one)") from exc
        if on_ready is not None:
            on_ready(*bound, tls is not None)
    return mqtt


def _tls_listener(config: BrokerConfig) -> TlsListener | None:
    if config.tls is None:
        return None
    tls: TlsConfig = config.tls
    limits = config.connect_timeout
    return TlsListener(server_context(tls),
                       user_from_cert=tls.user_from_cert if tls.identity_as_user else None,
                       handshake_timeout=float(limits), max_handshakes=config.max_connections)


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop constructor for ``[broker] loop`` / ``--loop`` (None: asyncio's).

    uvloop is optional: asking for it without it installed is a configuration error
    that says how to install it, not a silent fallback to the slower loop.
    """
    if name == "asyncio":
        return None
    if name != "uvloop":
        raise ConfigError(f"unknown event loop {name!r}; choose asyncio or uvloop")
    try:
        uvloop: Any = importlib.import_module("uvloop")
    except ImportError:
        raise ConfigError("the uvloop event loop was asked for (loop = \"uvloop\" or "
                          "--loop uvloop) but uvloop is not installed: pip install uvloop, "
                          "or use the default asyncio loop") from None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_broker(config: BrokerConfig) -> int:
    """Blocking: print the listening address, serve until SIGINT/SIGTERM, return 0."""

    where = (f"persistent messages in {Path(config.data_dir).resolve()}"
             if config.data_dir is not None else "in memory: messages are lost at exit")
    tls_only = config.tls is not None and config.tls.only

    def ready(host: str, port: int) -> None:
        if not tls_only:
            print(f"jmspy broker listening on {host}:{port} ({where})", flush=True)

    def tls_ready(host: str, port: int) -> None:
        tls: TlsConfig = config.tls
        certs = ("client certificates required" if tls.require_client_cert
                 else "client certificates optional" if tls.ca else "no client certificates")
        if tls.identity_as_user:
            certs += f", their {tls.user_from_cert} logs in"
        extra = f"; {where}" if tls_only else ""
        print(f"jmspy broker listening on {host}:{port} for STOMP over TLS ({certs}{extra})",
              flush=True)

    def mqtt_ready(host: str, port: int, tls: bool) -> None:
        print(f"jmspy broker listening on {host}:{port} for MQTT 3.1.1 and 5"
              f"{' over TLS' if tls else ''}", flush=True)

    def metrics_ready(host: str, port: int) -> None:
        print(f"jmspy broker metrics on http://{host}:{port}/metrics", flush=True)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(config, stop, ready, tls_ready, metrics_ready, mqtt_ready)

    with asyncio.Runner(loop_factory=loop_factory(config.loop)) as runner:
        runner.run(main())
    print("jmspy broker stopped", file=sys.stderr, flush=True)
    return 0
