"""The ``[limits]`` a STOMP listener puts on its connections (no client can take the loop
from the others): how long CONNECT may take, how many connections in total and per source
address, how long a client without heart-beats may stay silent, and how many bytes of
unfinished frames the broker holds. :class:`~.server.StompServer` admits connections by
them; :class:`~.liveness.Liveness` closes the ones that overstay them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from ..core.listener_stats import ListenerStats, Refused
from ..core.throttle import ThrottleSettings

__all__ = ["Admission", "ConnectionLimits"]


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


class _Addressed(Protocol):
    @property
    def address(self) -> str | None: ...


C = TypeVar("C", bound=_Addressed)


class Admission(Generic[C]):
    """A listener's open connections (``connections``), let in against ``max-connections``
    and the per-address cap; the STOMP and MQTT servers each keep one."""

    __slots__ = ("_listeners", "_per_address", "connections", "limits", "what")

    def __init__(self, limits: ConnectionLimits, listeners: ListenerStats,
                 what: str = "connections") -> None:
        self.limits = limits
        self._listeners = listeners  # counts the refusals by reason
        self.what = what  # "connections", "MQTT connections": the refusal's words
        self.connections: set[C] = set()
        self._per_address: dict[str | None, int] = {}

    def admit(self, conn: C) -> str | None:
        """Count ``conn`` in, or say why it may not come in (and count that)."""
        limits, what, address = self.limits, self.what, conn.address
        if limits.max_connections and len(self.connections) >= limits.max_connections:
            self._listeners.refuse(Refused.MAX_CONNECTIONS)
            return (f"this broker already serves {len(self.connections)} {what}, its "
                    "[limits] max-connections; try again later")
        same, cap = self._per_address.get(address, 0), limits.per_address_cap
        if cap and same >= cap:
            self._listeners.refuse(Refused.PER_ADDRESS)
            return (f"{same} {what} from {address} already, the [limits] "
                    f"max-connections-per-address = {cap}; close some first, or raise "
                    "max-connections-per-address in the broker's config")
        self.connections.add(conn)
        self._per_address[address] = same + 1
        return None

    def release(self, conn: C) -> None:
        """``conn`` is gone (a refused one was never counted)."""
        if conn in self.connections:
            self.connections.discard(conn)
            left = self._per_address.get(conn.address, 1) - 1
            if left > 0:
                self._per_address[conn.address] = left
            else:
                self._per_address.pop(conn.address, None)
