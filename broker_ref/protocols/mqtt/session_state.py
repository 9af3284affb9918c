"""What an MQTT session is beyond its connection: its subscriptions as SUBSCRIBE asked
for them, and the state a persistent session keeps while its client is away (the hub
holds it, :mod:`.hub_store` writes it to the broker's store)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.security import Principal

__all__ = ["StoredSession", "SubscriptionState"]


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

    def connection_ended(self, now: int) -> None:
        """Its connection ended at ``now``: the expiry clock starts."""
        self.expires_at = None if self.expiry is None else now + self.expiry * 1000
