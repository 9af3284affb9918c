"""What an MQTT session is beyond its connection: its subscriptions as SUBSCRIBE asked
for them, and the state a persistent session keeps while its client is away (the hub
holds it, :mod:`.hub_store` writes it to the broker's store)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core import ServerMessage
from ...core.security import Principal

__all__ = ["Reach", "StoredSession", "SubscriptionState"]


@dataclass(slots=True)
class SubscriptionState:
    """One subscription of a session, as SUBSCRIBE asked for it."""

    topic_filter: str
    qos: int
    no_local: bool = False
    retain_as_published: bool = False
    subscription_id: int | None = None
    share: str | None = None

    @classmethod
    def from_options(cls, text: str, options: int, subscription_id: int | None,
                     share: str | None) -> SubscriptionState:
        """The state SUBSCRIBE asks for ``text`` with its options byte."""
        return cls(text, options & 3, no_local=bool(options & 4),
                   retain_as_published=bool(options & 8),
                   subscription_id=subscription_id, share=share)


@dataclass(slots=True)
class StoredSession:
    """A session's state that outlives its connection (persistent sessions)."""

    client_id: str
    #: seconds after the connection ends (None: never expires; 0: ends with it)
    expiry: int | None
    principal: Principal | None = None
    subscriptions: dict[str, SubscriptionState] = field(default_factory=dict)
    #: packet ids of QoS 2 PUBLISHes received, routed, and waiting for their PUBREL
    inbound_qos2: set[int] = field(default_factory=set)
    #: packet ids of QoS 2 PUBLISHes sent whose PUBREC came and PUBCOMP did not: their
    #: PUBREL goes out again when the client comes back (.inflight)
    outbound_pubrel: set[int] = field(default_factory=set)
    expires_at: int | None = None
    #: the core connection ids this client id has had while this broker runs (a
    #: persistent session's no-local, :class:`Reach`; not stored: ids start again)
    connections: set[int] = field(default_factory=set)

    def connection_ended(self, now: int) -> None:
        """Its connection ended at ``now``: the expiry clock starts."""
        self.expires_at = None if self.expiry is None else now + self.expiry * 1000


@dataclass(slots=True, frozen=True)
class Reach:
    """What of the core's matches one subscription drops (settled unsent): a ``$``
    topic when its filter starts with a wildcard (MQTT-4.7.2-1, ``wild_first``), and,
    ``own`` set, what its own client published (MQTT-3.8.3-3: no-local on a persistent
    session, whose core subscription is a shared durable one, on which the core has no
    no_local; ``own`` is the client id's core connections, :attr:`StoredSession.
    connections`)."""

    wild_first: bool
    own: set[int] | None = None

    def drops(self, msg: ServerMessage) -> bool:
        return ((self.wild_first and msg.destination[:1] == "$")
                or (self.own is not None and msg.producer_connection in self.own))
