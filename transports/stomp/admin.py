"""Management-style operations of ``stomp://``: browsing, deleting durable
subscriptions, temporary queues and destination stats.

They share one shape -- a short-lived subscription or a request with a RECEIPT beside the
consumers' traffic -- and RabbitMQ needs each of them done its own way (queues declared
and deleted through SUBSCRIBE/UNSUBSCRIBE headers). :class:`StompAdmin` owns their reply
subscriptions; the transport routes a MESSAGE to it when :meth:`StompAdmin.reply_handler`
knows the subscription id.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from jmspy import errors
from jmspy.capabilities import Feature
from jmspy.destinations import Destination, Queue
from jmspy.message import Message
from jmspy.wire.headers import LEASE_COUNT, LEASE_RELEASE, LEASE_SETTLE, LEASES_DESTINATION

from .mapping import TEMP_QUEUE_PREFIX, BrokerProfile, stomp_destination
from .receipts import Receipts
from .received import from_frame
from .stats import query_stats
from .subscription import RABBIT_DURABLE

__all__ = ["AdminHost", "ReplyHandler", "StompAdmin"]

#: Called on the receiver thread with each MESSAGE of a reply subscription.
ReplyHandler = Callable[[dict[str, str], bytes], None]

#: RabbitMQ queue properties of an emulated TemporaryQueue (see create_temporary_queue)
_RABBIT_TEMPORARY = {"durable": "false", "auto-delete": "false", "exclusive": "true"}


class AdminHost(Protocol):
    """What :class:`StompAdmin` asks of the transport."""

    profile: BrokerProfile

    @property
    def where(self) -> str: ...

    def connection(self) -> Any:
        """The live stomp.py connection (waits out a reconnect; raises when down)."""

    def require(self, feature: Feature, detail: str = "") -> None:
        """Raise the capability matrix's refusal when the broker cannot carry it."""

    def has_durable_consumer(self, name: str) -> bool: ...


class StompAdmin:
    """Browsing, durable subscriptions, temporary queues and stats of one transport."""

    def __init__(self, host: AdminHost, receipts: Receipts, client_id: Callable[[], str | None]
                 ) -> None:
        self._host = host
        self._receipts = receipts
        self._client_id = client_id
        self._replies: dict[str, ReplyHandler] = {}

    def reply_handler(self, sid: str) -> ReplyHandler | None:
        """The handler of reply subscription ``sid``, if it is one of ours."""
        return self._replies.get(sid)

    def browse(self, queue: Queue, selector: str | None) -> list[Message]:
        self._host.require(Feature.BROWSER)
        sid = f"browse-{uuid.uuid4().hex[:8]}"
        done = threading.Event()
        found: list[Message] = []

        def collect(headers: dict[str, str], body: bytes) -> None:
            if headers.get("browser") == "end":
                done.set()
            else:
                found.append(from_frame(headers, body))

        self._replies[sid] = collect
        headers = {"browser": "true"}
        if selector:
            headers["selector"] = selector
        self._host.connection().subscribe(stomp_destination(queue), id=sid, ack="auto",
                                          headers=headers)
        try:
            self._receipts.need_reader()  # the answer comes as MESSAGE frames
            if not done.wait(30):
                raise errors.JMSException(f"browsing {queue} at {self._host.where} timed out")
        finally:
            self._replies.pop(sid, None)
            self._host.connection().unsubscribe(id=sid)
        return found

    def unsubscribe(self, name: str) -> None:
        self._host.require(Feature.UNSUBSCRIBE, "unsubscribing durable subscriptions")
        if self._host.profile.durable_header == "durable":  # RabbitMQ
            self._rabbit_unsubscribe(name)
        else:
            header = self._host.profile.durable_header
            self._host.connection().unsubscribe(id=name, headers={header: name})

    def durable_queue(self, name: str) -> str:
        """RabbitMQ: the queue behind durable subscription ``name`` (``x-queue-name``).
        Named from the client id and the name, as JMS identifies a durable subscription,
        so that ``unsubscribe(name)`` finds it without knowing its topic."""
        return f"jmspy-durable.{self._client_id() or ''}.{name}"

    def _rabbit_unsubscribe(self, name: str) -> None:
        """RabbitMQ deletes a durable subscription's queue only on an UNSUBSCRIBE with
        ``durable:true`` for a subscription open on this connection (its STOMP docs:
        the same ``durable`` and ``auto-delete`` values as the SUBSCRIBE). So: attach to
        the queue through a throw-away subscription naming it, then UNSUBSCRIBE that
        with ``durable:true`` (:meth:`_rabbit_queue_op`). An unknown name declares and
        deletes an empty queue: RabbitMQ cannot tell jmspy that none existed."""
        if self._host.has_durable_consumer(name):
            raise errors.IllegalStateException(
                f"durable subscription {name!r} has an open consumer on this "
                "connection; close it before unsubscribe()")
        self._rabbit_queue_op(self.durable_queue(name), RABBIT_DURABLE, delete=True)

    def _rabbit_queue_op(self, queue: str, declare: dict[str, str], *, delete: bool) -> None:
        """SUBSCRIBE to ``/topic/<queue>`` with ``x-queue-name: <queue>`` (declaring the
        queue with ``declare``, or attaching to it when it exists with those properties),
        then UNSUBSCRIBE: with ``durable:true`` RabbitMQ deletes the queue, without it
        the queue stays. Over STOMP that is the only way to create a queue with chosen
        properties without a message, or to delete one. The routing key is the queue's
        own unique name, so the binding this adds routes nothing else to it. Messages
        still queued when deleting arrive auto-acknowledged and are ignored. Older
        RabbitMQs name the queue to delete from the UNSUBSCRIBE frame, newer ones from
        the subscription: ``x-queue-name`` goes on both."""
        sid = f"q-{uuid.uuid4().hex[:10]}"
        self._replies[sid] = lambda headers, body: None  # nothing useful can arrive
        conn = self._host.connection()
        try:
            self._receipts.request(lambda headers: conn.subscribe(
                f"/topic/{queue}", id=sid, ack="auto",
                headers={**declare, "x-queue-name": queue, **headers}))
            extra = {**declare, "durable": "true", "x-queue-name": queue} if delete else {}
            self._receipts.request(lambda headers: conn.unsubscribe(
                id=sid, headers={**extra, **headers}))
        finally:
            self._replies.pop(sid, None)

    def create_temporary_queue(self) -> str:
        self._host.require(Feature.TEMPORARY_QUEUES)
        if self._host.profile.family == "RabbitMQ":
            # RabbitMQ's /temp-queue/ names work only in reply-to headers (SUBSCRIBE and
            # SEND refuse them), so a JMS TemporaryQueue is an exclusive (dies with this
            # connection, only it may consume), non-durable queue with a unique name,
            # declared now so that anyone may send to it before a consumer exists.
            # Addressed as /amq/queue/ (use an existing queue, declare nothing): a
            # re-declaration from another connection would be refused.
            queue = f"{TEMP_QUEUE_PREFIX}{uuid.uuid4().hex[:16]}"
            self._rabbit_queue_op(queue, _RABBIT_TEMPORARY, delete=False)
            return f"/amq/queue/{queue}"
        return f"/temp-queue/jmspy-{uuid.uuid4().hex[:12]}"

    def delete_temporary_queue(self, name: str) -> None:
        """Elsewhere temporary queues live as long as the STOMP connection (nothing to
        send); RabbitMQ's emulated ones are deleted now."""
        prefix = f"/amq/queue/{TEMP_QUEUE_PREFIX}"
        if self._host.profile.family == "RabbitMQ" and name.startswith(prefix):
            self._rabbit_queue_op(name[len("/amq/queue/"):], _RABBIT_TEMPORARY, delete=True)

    def settle_leases(self, tokens: list[str], release: bool) -> int:
        """SEND to ``/jmspy/leases`` (jmspy broker), waiting for the RECEIPT that says
        how many messages the tokens held."""
        op = LEASE_RELEASE if release else LEASE_SETTLE
        receipt, event = self._receipts.expect(keep_answer=True)
        conn = self._host.connection()
        try:
            conn.send(LEASES_DESTINATION, b"", headers={op: ",".join(tokens),
                                                        "receipt": receipt})
            self._receipts.wait(receipt, event, conn, what="the lease request")
        finally:
            answer = self._receipts.answer(receipt)
        count = answer.get(LEASE_COUNT, "")
        return int(count) if count.isdigit() else 0

    def destination_stats(self, destination: Destination) -> dict[str, Any]:
        self._host.require(Feature.DESTINATION_STATS)
        host = self._host
        return query_stats(host.connection(), host.profile, host.where, self._replies,
                           destination, need_reader=self._receipts.need_reader)
