"""The ``[limits]`` a STOMP listener puts on its connections (no client can take the loop
from the others): how long CONNECT may take, how many connections in total and per source
address, how long a client without heart-beats may stay silent, and how many bytes of
unfinished frames the broker holds. :class:`~.server.StompServer` admits connections by
them; :class:`~.liveness.Liveness` closes the ones that overstay them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.throttle import ThrottleSettings

__all__ = ["ConnectionLimits"]


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Per-server limits on connections (the ``[limits]`` keys in kebab-case).

    ``connect_timeout`` (s, 0 = none): RabbitMQ's handshake timeout is 10 s.
    ``max_connections``: ActiveMQ's transport connector default, 1000 (0 = no cap).
    ``max_connections_per_address`` (0 = no cap; None = a tenth of ``max_connections``,
    100 by default): one address, loopback included, cannot take every connection.
    ``idle_timeout`` (s, 0 = none): a connected client that negotiated no heart-beats
    towards the broker, sends nothing (no frame, no EOL) and is sent no frame for this
    long is closed with an ERROR; 60 s, Artemis' STOMP connection TTL. With heart-beats
    the heart-beat rule (silent past twice the interval) decides instead.
    ``input_budget`` (bytes, 0 = none; None = the broker's own, 64 MiB by default): frame
    bytes being read, across the broker's connections (.core.input_budget).
    """

    connect_timeout: float = 10.0
    max_connections: int = 1000
    max_connections_per_address: int | None = None
    idle_timeout: float = 60.0
    throttle: ThrottleSettings = field(default_factory=ThrottleSettings)
    input_budget: int | None = None

    @property
    def per_address_cap(self) -> int:
        """The per-address cap in force (0: none)."""
        if self.max_connections_per_address is not None:
            return self.max_connections_per_address
        return max(1, self.max_connections // 10) if self.max_connections else 0
