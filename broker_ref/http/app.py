"""The broker's HTTP listener: ``/metrics`` and the management API on one port.

Why aiohttp: it is a maintained asyncio server, so it runs on the broker's own event
loop and every handler's core call is made on the thread that owns the core (no
cross-thread hand-over, no lock for ``jmspy broker``); ``prometheus_client`` still makes
the exposition (``generate_latest``), served by a route of this app. ``pip install
'jmspy[http]'``. Kept out of the core (which imports no network code), beside
:mod:`..metrics_http`, whose collector it reuses.

Routes (docs/observability.md has the reference)::

    GET    /metrics                                   Prometheus text format
    GET    /api/destinations                          every destination, its counters
    GET    /api/destinations/{kind}/{name}            one destination's counters
    GET    /api/queues/{name}/messages?offset=&limit= browse a queue (paged)
    DELETE /api/queues/{name}/messages                purge
    DELETE /api/queues/{name}/messages/{id}           delete one message
    POST   /api/queues/{name}/messages/{id}/move      {"to": ..., "kind": ...}
    POST   /api/queues/{name}/retry                   dead letters back to their origin
    GET    /api/connections                           connections, consumers' windows
    DELETE /api/connections/{id}                      close one
    GET    /console/                                  the web console (static pages)

With security on, every route needs HTTP basic credentials of a broker user (``/metrics``
too, unless ``[broker.http] metrics-auth = false``), and the API's routes the ``admin``
permission on what they touch.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from aiohttp import web

from ..config_error import ConfigError
from ..core import admin
from ..core.broker import Broker
from ..core.errors import AccessDenied, BrokerError, DestinationNotFound, InvalidDestination
from ..core.throttle import LoginThrottle, ThrottleSettings
from ..metrics_http import BrokerCollector
from .auth import Authenticator, Throttled, Unauthorized
from .handlers import Access, BadRequest, Handlers

__all__ = ["HttpServer", "make_app", "start_http_server"]

log = logging.getLogger("jmspy.broker.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: the web console's static pages (no build step): HTML, CSS and JavaScript on the API
CONSOLE = Path(__file__).with_name("console")

_NOT_FOUND = (DestinationNotFound, admin.MessageNotFound, admin.ConnectionNotFound)


def _error(status: int, error: str, message: str) -> web.Response:
    resp = web.json_response({"error": error, "message": message}, status=status)
    if status == 401:
        resp.headers["WWW-Authenticate"] = 'Basic realm="jmspy broker", charset="UTF-8"'
    return resp


class _ListenerCollector:
    """The listeners' series: logins the HTTP listener refused, and connections by
    state (``connecting``: accepted by the protocol host, not logged in yet; ``open``:
    logged in)."""

    def __init__(self, broker: Broker, auth: Authenticator,
                 accepted: Callable[[], int] | None) -> None:
        self._broker = broker
        self._auth = auth
        self._accepted = accepted

    def collect(self) -> Iterator[Any]:
        core: Any = importlib.import_module("prometheus_client.core")
        family = core.CounterMetricFamily(
            "jmspy_http_logins_refused", "HTTP requests refused for missing or wrong "
            "credentials", labels=[])
        family.add_metric([], self._auth.refused)
        yield family
        throttled = core.CounterMetricFamily(
            "jmspy_http_logins_throttled", "HTTP requests refused by the failed-login "
            "throttle without a password check (also counted as refused)", labels=[])
        throttled.add_metric([], self._auth.throttled)
        yield throttled
        opened = len(self._broker.connections())
        accepted = opened if self._accepted is None else self._accepted()
        states = core.GaugeMetricFamily("jmspy_broker_connections_by_state",
                                        "Connections by state", labels=["state"])
        states.add_metric(["open"], opened)
        states.add_metric(["connecting"], max(0, accepted - opened))
        yield states


def make_app(broker: Broker, *, core_lock: AbstractContextManager[object] | None = None,
             close_connection: Callable[[object, str], bool] | None = None,
             accepted: Callable[[], int] | None = None,
             metrics_auth: bool = True,
             throttle: LoginThrottle | None = None) -> web.Application:
    """The aiohttp application over ``broker`` (it must run on the broker's loop).
    ``close_connection`` ends a protocol host's connection (its client hears why);
    ``accepted`` counts the host's connections, logged in or not; ``throttle`` counts
    failed logins (the STOMP listener's, so both protocols share one budget per
    address; without one, a throttle of the default ``[limits]`` of its own)."""
    try:
        exposition: Any = importlib.import_module("prometheus_client.exposition")
        registry_mod: Any = importlib.import_module("prometheus_client.registry")
    except ImportError:
        raise ConfigError("the broker's HTTP listener needs prometheus_client: "
                          "pip install 'jmspy[http]'") from None
    lock = core_lock or nullcontext()
    auth = Authenticator(broker.security,
                         throttle or LoginThrottle(ThrottleSettings(), broker.now))
    registry = registry_mod.CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, None))
    registry.register(_ListenerCollector(broker, auth, accepted))
    handlers = Handlers(broker, lock, close_connection)

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        open_metrics = request.path == "/metrics" and not metrics_auth
        try:
            principal = None if open_metrics else await auth.principal(
                request.headers.get("Authorization"), request.remote)
            request["access"] = Access(broker, principal)
            return await handler(request)
        except Unauthorized as exc:
            return _error(401, "unauthorized", str(exc))
        except Throttled as exc:
            answer = _error(429, "too-many-failed-logins", str(exc))
            answer.headers["Retry-After"] = str(exc.retry_after_s)
            return answer
        except AccessDenied as exc:
            return _error(403, "forbidden", exc.message)
        except _NOT_FOUND as exc:
            return _error(404, "not-found", exc.message)
        except (BadRequest, InvalidDestination) as exc:
            return _error(400, "bad-request", str(exc))
        except BrokerError as exc:
            return _error(409, exc.code, exc.message)
        except web.HTTPException as exc:
            if exc.status >= 400 and not request.path.startswith("/console"):
                return _error(exc.status, "http", exc.reason)
            raise

    async def metrics(request: web.Request) -> web.Response:
        if metrics_auth:  # every destination's series: for those who administer some
            access: Access = request["access"]
            access.check_any(broker)
        with lock:
            data = exposition.generate_latest(registry)
        return web.Response(body=data, headers={"Content-Type": exposition.CONTENT_TYPE_LATEST})

    async def console_home(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/console/")

    async def console_index(request: web.Request) -> web.FileResponse:
        return web.FileResponse(CONSOLE / "index.html")

    app = web.Application(middlewares=[guard])
    app.router.add_get("/", console_home)
    app.router.add_get("/console", console_home)
    app.router.add_get("/console/", console_index)
    app.router.add_static("/console/", CONSOLE)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/api/destinations", handlers.destinations)
    app.router.add_get("/api/destinations/{kind}/{name}", handlers.destination)
    app.router.add_get("/api/queues/{name}/messages", handlers.browse)
    app.router.add_delete("/api/queues/{name}/messages", handlers.purge)
    app.router.add_delete("/api/queues/{name}/messages/{id}", handlers.delete_message)
    app.router.add_post("/api/queues/{name}/messages/{id}/move", handlers.move_message)
    app.router.add_post("/api/queues/{name}/retry", handlers.retry)
    app.router.add_get("/api/connections", handlers.connections)
    app.router.add_delete("/api/connections/{id}", handlers.close_connection)
    return app


class HttpServer:
    """The running listener: its address, and how to stop it."""

    def __init__(self, runner: web.AppRunner, host: str, port: int) -> None:
        self._runner = runner
        self.host = host
        self.port = port

    async def stop(self) -> None:
        await self._runner.cleanup()


async def start_http_server(broker: Broker, host: str, port: int, *,
                            core_lock: AbstractContextManager[object] | None = None,
                            close_connection: Callable[[object, str], bool] | None = None,
                            accepted: Callable[[], int] | None = None,
                            metrics_auth: bool = True,
                            throttle: LoginThrottle | None = None) -> HttpServer:
    """Serve ``/metrics`` and the API on ``http://host:port`` (port 0: a free one), on
    the running loop, which must be the broker's."""
    app = make_app(broker, core_lock=core_lock, close_connection=close_connection,
                   accepted=accepted, metrics_auth=metrics_auth, throttle=throttle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise ConfigError(f"cannot serve HTTP on {host}:{port}: {exc.strerror}; pick another "
                          "--metrics-port or [broker.http] port (0 picks a free one)") from exc
    bound = runner.addresses[0]
    return HttpServer(runner, bound[0], bound[1])
