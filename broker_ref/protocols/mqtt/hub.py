"""What MQTT sessions of one broker share: retained messages, client ids in use, the
state of persistent sessions while their client is away, and delayed wills.

Sans-I/O like the sessions: :meth:`MqttHub.process` runs what is due at the broker
clock's ``now`` (session expiry, delayed wills); the host calls it from a timer.
A persistent session's subscriptions are durable subscriptions of the core (named after
their filter, keyed by the MQTT client id as JMS keys them by client id), so the
messages that arrive while its client is away wait in the core, in its store when they
are persistent (QoS 1 and 2); expiry deletes those subscriptions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ...core import Broker, BrokerError, Delivery, ServerMessage, pattern_matches
from ...core.security import Principal
from . import topics
from .hub_store import HubStore
from .session_state import StoredSession, SubscriptionState


class ConnectedSession(Protocol):
    """What the hub needs of a connected session (:class:`~.session.MqttSession`)."""

    def taken_over(self) -> None: ...


def durable_name(client_id: str, topic_filter: str) -> str:
    """The core subscription of a persistent session's subscription: a shared durable
    one named after client id and filter (the core keys shared subscriptions by name
    alone, so MQTT's core connections need no JMS client id; the hub keeps MQTT client
    ids unique)."""
    return f"mqtt:{client_id}:{topic_filter}"

__all__ = ["ConnectedSession", "MqttHub", "StoredSession", "SubscriptionState", "durable_name"]


class _Quiet:
    """The callback of the hub's short-lived core connections (they consume nothing)."""

    def deliver(self, delivery: Delivery) -> None:
        pass

    def consumer_closed(self, consumer_id: int, reason: str) -> None:
        pass

    def send_done(self, ticket: object, error: BrokerError | None) -> None:
        pass


class MqttHub:
    """The MQTT state of one broker (see the module docstring)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        #: what of this state outlives the broker (its store's records; none without one)
        self.saved = HubStore(broker.store)
        #: core topic -> the retained message (at most one per topic)
        self.retained: dict[str, ServerMessage] = self.saved.retained()
        #: client id -> the session connected under it now
        self.active: dict[str, ConnectedSession] = {}
        #: client id -> state of a persistent session (connected or not)
        self.sessions: dict[str, StoredSession] = {
            s.client_id: s for s in self.saved.sessions(broker.now())}
        #: (due, client id, will message, principal) of wills waiting for their delay
        self.wills: list[tuple[int, str, ServerMessage, Principal | None]] = []

    def retain(self, msg: ServerMessage) -> None:
        """Keep ``msg`` as its topic's retained message (an empty payload clears it)."""
        if msg.body in (b"", ""):
            if self.retained.pop(msg.destination, None) is not None:
                self.saved.retain(msg.destination, None)
        else:
            self.retained[msg.destination] = msg
            self.saved.retain(msg.destination, msg)

    def retained_for(self, topic_filter: str, now: int) -> list[ServerMessage]:
        """The retained messages MQTT ``topic_filter`` (not a ``$share/`` one) matches
        (a ``$`` topic only for a filter that names it: topics.reaches); expired ones
        are dropped."""
        pattern = topics.core_filter(topic_filter)
        out = []
        for name, msg in list(self.retained.items()):
            if msg.expiration and msg.expiration <= now:
                del self.retained[name]
                self.saved.retain(name, None)
            elif pattern_matches(pattern, name) and topics.reaches(topic_filter, name):
                out.append(msg)
        return out

    def will(self, msg: ServerMessage, client_id: str, delay: int,
             principal: Principal | None, now: int) -> None:
        """A connection of ``client_id`` ended without DISCONNECT: publish its will,
        now or (``delay`` s > 0, a persistent session's Will Delay Interval) later."""
        if delay:
            self.wills.append((now + delay * 1000, client_id, msg, principal))
        else:
            self.publish(msg, principal)

    def save(self, client_id: str) -> None:
        """``client_id``'s persistent session may have changed (a turn of its connection
        ended, or the connection did): its record is written if it did."""
        stored = self.sessions.get(client_id)
        if stored is not None:
            self.saved.save(stored)

    def cancel_will(self, client_id: str) -> None:
        """The client came back within its will delay: no will (MQTT 5 3.1.3.2.2)."""
        self.wills = [w for w in self.wills if w[1] != client_id]

    def next_deadline(self) -> int | None:
        dues = [w[0] for w in self.wills]
        dues += [s.expires_at for s in self.sessions.values() if s.expires_at is not None]
        return min(dues) if dues else None

    def process(self, now: int) -> None:
        """Publish the wills whose delay is over; end the sessions whose expiry is."""
        self._send_wills(lambda due, _client_id: due <= now)
        for _client_id, stored in list(self.sessions.items()):
            if stored.expires_at is not None and stored.expires_at <= now:
                self.discard(stored)

    def _send_wills(self, picks: Callable[[int, str], bool]) -> None:
        """Publish (and forget) the waiting wills ``picks(due, client_id)`` names."""
        going = [w for w in self.wills if picks(w[0], w[1])]
        if going:
            self.wills = [w for w in self.wills if not picks(w[0], w[1])]
            for _, _client_id, msg, principal in going:
                self.publish(msg, principal)

    def publish(self, msg: ServerMessage, principal: Principal | None) -> None:
        """Send a will (or any message) on behalf of a client that is gone."""
        if self.broker.closed:
            return
        try:
            conn = self.broker.connect(_Quiet(), principal=principal)
        except BrokerError:
            return
        try:
            conn.route_admitted(msg)
            if msg.properties.get("JMS_jmspy_MQTT_Retain"):
                self.retain(msg)
        except BrokerError:
            pass
        finally:
            conn.close()

    def discard(self, stored: StoredSession) -> None:
        """End a stored session: a will still waiting for its delay goes out now (MQTT 5
        3.1.3.2.2: the delay or the session's end, whichever comes first), and its
        durable subscriptions are deleted from the core."""
        self.sessions.pop(stored.client_id, None)
        self.saved.forget(stored.client_id)
        self._send_wills(lambda _due, client_id: client_id == stored.client_id)
        durable = [s.topic_filter for s in stored.subscriptions.values() if s.share is None]
        if not durable or self.broker.closed or stored.client_id in self.active:
            return
        try:
            conn = self.broker.connect(_Quiet(), principal=stored.principal)
        except BrokerError:
            return
        try:
            for name in durable:
                try:
                    conn.unsubscribe(durable_name(stored.client_id, name))
                except BrokerError:
                    pass
        finally:
            conn.close()

    def state(self) -> dict[str, Any]:
        return {"retained": len(self.retained), "active": len(self.active),
                "sessions": len(self.sessions), "wills": len(self.wills)}
