"""A STOMP session's SUBSCRIBE and UNSUBSCRIBE frames: checking them, opening the core
consumer (or a browse snapshot) and closing it.

These are per-connection frames, off the path of every message: a
:class:`~.protocol.StompSession` composes one :class:`SessionSubscribing` and hands it the
frame with what it needs to act (its core connection, the negotiated version, its
output). The indexes every delivery and ACK read (subscriptions by id and by consumer,
unacknowledged tags) stay the session's dicts, which it passes here at construction: the
session reads them per message with no call in between. What only these frames use is
kept here: the ids of browse subscriptions and the consumer ids handed out.
"""

from __future__ import annotations

import itertools

from jmspy import twins
from jmspy.stomp_frames import Frame
from jmspy.wire.headers import DESTINATION_FLOW_LIMIT, MAX_MESSAGES, SEEN_THROUGH

from ...core import Broker, DestinationKind, ServerConnection
from .browse import browse_frames
from .credit import SessionCredit
from .destinations import SessionDestinations
from .dialects import subscription_naming, unsubscribe_naming
from .refusals import ProtocolError, check_echoable
from .subscription import AUTO, CLIENT, Subscription

__all__ = ["SessionSubscribing"]

_codec = twins.stomp_codec


class SessionSubscribing:
    """SUBSCRIBE and UNSUBSCRIBE for one STOMP session."""

    __slots__ = ("_browsers", "_by_consumer", "_consumer_ids", "_credit", "_destinations",
                 "_subs", "_tag_owner")

    def __init__(self, subs: dict[str, Subscription], by_consumer: dict[int, Subscription],
                 tag_owner: dict[int, Subscription], destinations: SessionDestinations,
                 credit: SessionCredit) -> None:
        """The session's indexes (by id, by consumer id, unacked tag -> subscription),
        its destinations and its credit."""
        self._subs = subs
        self._by_consumer = by_consumer
        self._tag_owner = tag_owner
        self._destinations = destinations
        self._credit = credit
        self._browsers: set[str] = set()  # ids of browse subscriptions (browser:true)
        self._consumer_ids = itertools.count(1)

    def subscribe(self, frame: Frame, headers: dict[str, str], core: ServerConnection,
                  broker: Broker, version: str, out: list[bytes]) -> None:
        target = self._destinations.target(headers.get("destination"))
        sid = headers.get("id")
        if sid is None:
            if version != "1.0":
                raise ProtocolError("missing id header", "SUBSCRIBE needs an id header in "
                                    "STOMP 1.1/1.2; choose one unique per connection")
            sid = headers.get("destination") or ""
        check_echoable(version, "id", sid)
        if sid in self._subs or sid in self._browsers:
            raise ProtocolError("duplicate subscription id", f"subscription id {sid!r} is "
                                "already in use on this connection; choose another")
        if headers.get("browser") == "true":  # ActiveMQ's queue browser: a snapshot
            self._subscribed(headers, version, out)
            out.extend(browse_frames(core, target, sid, headers.get("selector"),
                                     version, self._destinations.local_temps))
            self._browsers.add(sid)  # until the client UNSUBSCRIBEs it
            return
        ack = headers.get("ack") or "auto"
        if ack not in (AUTO, CLIENT, "client-individual"):
            raise ProtocolError("invalid ack mode", f"ack:{ack!r} must be auto, client or "
                                "client-individual")
        name, durable, shared = subscription_naming(headers, target.kind, sid)
        sub = Subscription.from_headers(sid, ack, frame, name)
        sub.broker_settles = (
            target.kind is DestinationKind.QUEUE
            and broker.settings_for(target.name).semantics == "at-most-once"
        )
        backlog = headers.get("jmspy-backlog")
        if backlog is not None and (not backlog.isdigit() or int(backlog) < 1):
            raise ProtocolError("invalid jmspy-backlog", f"jmspy-backlog:{backlog!r} must be "
                                "a whole number >= 1 (the unacked messages this subscriber "
                                "asks to hold; the queue's max_per_subscription_backlog caps it)")
        budget = headers.get(MAX_MESSAGES)
        if budget is not None and (not budget.isdigit() or int(budget) < 1):
            raise ProtocolError(f"invalid {MAX_MESSAGES}", f"{MAX_MESSAGES}:{budget!r} must be "
                                "a whole number >= 1 (the most messages this subscription "
                                "is to be sent); leave it out for no limit")
        sub.budget = None if budget is None else int(budget)
        cid = next(self._consumer_ids)
        info = core.create_consumer(
            cid, target.kind, target.name,
            selector=headers.get("selector"),
            no_local=(headers.get("activemq.noLocal") or "").lower() == "true",
            subscription_name=name, durable=durable, shared=shared,
            auto_ack=ack == AUTO, credit=0,
            backlog=int(backlog) if backlog is not None else None,
        )
        sub.start(cid, info.destination_flow_limit)
        self._subs[sid] = sub
        self._by_consumer[cid] = sub
        self._subscribed(headers, version, out, info.destination_flow_limit)
        self._credit.start(sub)  # its first window: deliveries may follow at once

    @staticmethod
    def _subscribed(headers: dict[str, str], version: str, out: list[bytes],
                    destination_limit: int | None = None) -> None:
        """The RECEIPT of a SUBSCRIBE, written before the first MESSAGE the subscription
        delivers (RabbitMQ and ActiveMQ answer so; clients that subscribe, wait for the
        receipt, then expect messages rely on it). The session's ``_dispatch`` leaves
        SUBSCRIBE's to it. It carries the destination's own flow limit, when it has one:
        the window is the lower of that and the client's, and the client reports which
        one set it."""
        receipt = headers.get("receipt")
        if receipt is not None:
            answer = [("receipt-id", receipt)]
            if destination_limit is not None:
                answer.append((DESTINATION_FLOW_LIMIT, str(destination_limit)))
            out.append(_codec.encode_frame(Frame("RECEIPT", answer), version))

    def unsubscribe(self, headers: dict[str, str], core: ServerConnection) -> None:
        sid = headers.get("id") or headers.get("destination")
        seen_through = _seen_through(headers)
        if sid in self._browsers:
            self._browsers.discard(sid)
            return
        sub = self._subs.pop(sid or "", None)
        name = unsubscribe_naming(headers, sid)
        if sub is None and name is None:
            raise ProtocolError("unknown subscription", f"no subscription with id {sid!r} "
                                "on this connection")
        if sub is not None:
            # what the client never gave its application goes back unmarked
            unseen = [] if seen_through is None else [t for t in sub.unacked
                                                      if t > seen_through]
            sub.closed = True
            del self._by_consumer[sub.consumer_id]
            core.close_consumer(sub.consumer_id, unseen=unseen)
            returned = sub.drop_unacked()
            for tag in returned:
                self._tag_owner.pop(tag, None)
            self._credit.closed(sub, len(returned))
        if name is not None:  # ActiveMQ: naming the subscription on UNSUBSCRIBE deletes it
            core.unsubscribe(name)


def _seen_through(headers: dict[str, str]) -> int | None:
    """``jmspy-seen-through``: the ack id of the last of the subscription's messages its
    client gave the application. The client hands them over in delivery order, so the later
    ones (prefetched, stashed, or still on the wire) are the unseen. None without the
    header: then all were seen, as for any other client."""
    value = headers.get(SEEN_THROUGH)
    if value is None:
        return None
    if not value.isdigit():
        raise ProtocolError(f"invalid {SEEN_THROUGH}", f"{SEEN_THROUGH} must be the ack id "
                            "of the last message the application was given (0: none), got "
                            f"{value!r}")
    return int(value)
