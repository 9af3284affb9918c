"""The management API's resources: destinations, a queue's messages, connections.

Each handler runs on the broker's event loop (aiohttp serves on it), so its core calls
are the loop's own, as a STOMP frame's are; nothing here touches the core's private
state: the operations are :mod:`jmspy.broker_ref.core.admin`'s and the broker's public
reads. Every handler checks the ``admin`` permission of the destination it touches
before it has any effect (:class:`Access`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from aiohttp import web

from jmspy.errors import JMSException

from ..core import admin
from ..core.api import ORIGINAL_DESTINATION, DestinationKind, ServerMessage
from ..core.broker import Broker
from ..core.errors import DestinationNotFound
from ..core.security import Principal

__all__ = ["Access", "BadRequest", "Handlers", "message_json"]

#: most messages one browse page holds
MAX_PAGE = 1000
DEFAULT_PAGE = 50


class BadRequest(JMSException):
    """The request is malformed (HTTP 400); the message says how to fix it."""


class Access:
    """The ``admin`` checks of one request's principal, as STOMP's stats make them."""

    def __init__(self, broker: Broker, principal: Principal | None) -> None:
        self._security = broker.security
        self.principal = principal

    def may(self, kind: DestinationKind, name: str) -> bool:
        security = self._security
        return security is None or security.allows(self.principal, "admin", kind, name)

    def check(self, kind: DestinationKind, name: str) -> None:
        security = self._security
        if security is not None:
            security.authorize(self.principal, "admin", kind, name)

    def check_any(self, broker: Broker) -> None:
        """AccessDenied unless the principal administers some destination (as reading
        ``/jmspy/stats`` requires)."""
        security = self._security
        if security is not None:
            security.visible_stats(self.principal, ())


def message_json(m: ServerMessage) -> dict[str, Any]:
    """A message as the API shows it; a bytes body in base64 (``bodyEncoding``)."""
    body: Any = m.body
    encoding = "none" if body is None else "json"
    if isinstance(body, bytes):
        body, encoding = base64.b64encode(body).decode("ascii"), "base64"
    elif isinstance(body, str):
        encoding = "text"
    return {
        "messageId": m.message_id,
        "destination": m.destination,
        "kind": m.kind.value,
        "bodyType": m.body_type.name.lower(),
        "body": body,
        "bodyEncoding": encoding,
        "properties": {k: v if isinstance(v, (str, int, float, bool)) or v is None
                       else repr(v) for k, v in m.properties.items()},
        "persistent": m.persistent,
        "priority": m.priority,
        "timestamp": m.timestamp,
        "expiration": m.expiration,
        "correlationId": m.correlation_id,
        "type": m.jms_type,
        "size": m.size,
    }


def _int(request: web.Request, key: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"query parameter {key}={raw!r} must be an integer") from None
    if not low <= value <= high:
        raise BadRequest(f"query parameter {key}={value} must be between {low} and {high}")
    return value


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        data = json.loads(await request.read() or b"{}")
    except ValueError as exc:
        raise BadRequest(f"the request body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    return data


class Handlers:
    """The API's request handlers over one broker (and its STOMP host, for closing
    connections). ``core_lock`` is held around core calls (the STOMP server's)."""

    def __init__(self, broker: Broker, core_lock: AbstractContextManager[object],
                 close_connection: Callable[[object, str], bool] | None) -> None:
        self._broker = broker
        self._lock = core_lock
        self._close = close_connection

    @staticmethod
    def access(request: web.Request) -> Access:
        access: Access = request["access"]
        return access

    async def destinations(self, request: web.Request) -> web.Response:
        access = self.access(request)
        access.check_any(self._broker)
        with self._lock:
            stats = self._broker.all_stats()
            usage = self._broker.usage()
        visible = [s.as_dict() for s in stats if access.may(s.kind, s.name)]
        return web.json_response({"destinations": visible, "broker": usage})

    async def destination(self, request: web.Request) -> web.Response:
        kind = _kind(request.match_info["kind"])
        name = request.match_info["name"]
        self.access(request).check(kind, name)
        with self._lock:
            stats = self._broker.stats(name, kind)
        return web.json_response(stats.as_dict())

    async def browse(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.access(request).check(DestinationKind.QUEUE, name)
        offset = _int(request, "offset", 0, 0, 2**31)
        limit = _int(request, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
        with self._lock:
            if name not in self._broker.queues:
                raise DestinationNotFound(f"no queue named {name!r}; list the "
                                                "destinations first")
            messages = self._broker.queues[name].browse(None)
        page = messages[offset:offset + limit]
        return web.json_response({
            "queue": name, "total": len(messages), "offset": offset, "limit": limit,
            "messages": [message_json(m) for m in page],
        })

    async def purge(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.access(request).check(DestinationKind.QUEUE, name)
        with self._lock:
            result = admin.purge(self._broker, name)
        return web.json_response({"queue": name, "removed": result.removed,
                                  "pagedLeft": result.paged_left})

    async def delete_message(self, request: web.Request) -> web.Response:
        name, mid = request.match_info["name"], request.match_info["id"]
        self.access(request).check(DestinationKind.QUEUE, name)
        with self._lock:
            admin.remove_message(self._broker, name, mid)
        return web.json_response({"queue": name, "removed": mid})

    async def move_message(self, request: web.Request) -> web.Response:
        name, mid = request.match_info["name"], request.match_info["id"]
        data = await _body(request)
        target = data.get("to")
        if not isinstance(target, str) or not target:
            raise BadRequest('the body must name the target: {"to": "<destination>", '
                             '"kind": "queue" or "topic" (optional)}')
        raw_kind = data.get("kind")
        kind = None if raw_kind is None else _kind(str(raw_kind))
        access = self.access(request)
        access.check(DestinationKind.QUEUE, name)
        access.check(kind or self._kind_of(target), target)
        with self._lock:
            admin.move_message(self._broker, name, mid, target, kind)
        return web.json_response({"queue": name, "moved": mid, "to": target})

    def _kind_of(self, name: str) -> DestinationKind:
        if name not in self._broker.queues and name in self._broker.post_office.topics:
            return DestinationKind.TOPIC
        return DestinationKind.QUEUE

    async def retry(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        access = self.access(request)
        access.check(DestinationKind.QUEUE, name)
        with self._lock:
            q = self._broker.queues.get(name)
            if q is None:
                raise DestinationNotFound(f"no queue named {name!r}; list the "
                                                "destinations first")
            origins = {m.properties.get(ORIGINAL_DESTINATION) for m in q.browse(None)}
            for origin in sorted(o for o in origins if isinstance(o, str) and o):
                access.check(self._kind_of(origin), origin)  # moving there is adminning it
            result = admin.retry_dead_letters(self._broker, name)
        return web.json_response({"queue": name, "moved": result.moved,
                                  "skipped": result.skipped})

    async def connections(self, request: web.Request) -> web.Response:
        access = self.access(request)
        access.check_any(self._broker)
        with self._lock:
            infos = admin.connection_info(self._broker)
        out = []
        for info in infos:
            out.append({
                "id": info.connection_id, "user": info.user, "clientId": info.client_id,
                "flowLimit": info.flow_limit,
                "consumers": [
                    {"id": c.consumer_id, "queue": c.queue, "credit": c.credit,
                     "delivering": c.delivering, "limit": c.limit,
                     "limitSetBy": c.limit_set_by, "selector": c.has_selector,
                     "clientLimit": c.client_limit, "threshold": c.threshold,
                     "unconsumed": c.unconsumed, "askedBy": c.asked_by}
                    for c in info.consumers if access.may(DestinationKind.QUEUE, c.queue)],
            })
        return web.json_response({"connections": out})

    async def close_connection(self, request: web.Request) -> web.Response:
        raw = request.match_info["id"]
        try:
            cid = int(raw)
        except ValueError:
            raise BadRequest(f"connection id {raw!r} must be an integer") from None
        access = self.access(request)
        access.check_any(self._broker)
        with self._lock:
            conn = admin.find_connection(self._broker, cid)
            for c in conn.consumers():  # closing it ends those consumers
                access.check(DestinationKind.QUEUE, c.queue.name)
            who = access.principal.describe() if access.principal is not None else "admin"
            reason = f"closed through the management API by {who}"
            if self._close is None or not self._close(conn, reason):
                conn.close()  # not one of the STOMP server's (an in-process client)
        return web.json_response({"closed": cid})


def _kind(raw: str) -> DestinationKind:
    for kind in DestinationKind:
        if raw in (kind.value, kind.name.lower()):
            return kind
    raise BadRequest(f"destination kind {raw!r} must be 'queue' or 'topic'")



