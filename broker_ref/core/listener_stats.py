"""What the broker's listeners refused or closed, and the frame bytes they are reading
(sans-I/O): the connection side of ``Broker.usage()``.

The protocol hosts enforce the connection limits (a cap in total and per address, login
throttling, connect and idle timeouts); an operator whose clients are being turned away
needs to see which limit did it without reading logs. The counters are the broker's, not
one listener's, so every host of a broker adds to the same ones, and the broker-wide
:class:`~.input_budget.InputBudget` lives here too.
"""

from __future__ import annotations

from enum import Enum

from .input_budget import DEFAULT_INPUT_BUDGET, InputBudget

__all__ = ["Closed", "ListenerStats", "Refused"]


class Refused(Enum):
    """Why a connection was turned away (value: its ``Broker.usage()`` key)."""

    MAX_CONNECTIONS = "connectionsRefusedMaxConnections"
    PER_ADDRESS = "connectionsRefusedPerAddress"
    LOGIN_THROTTLED = "connectionsRefusedLoginThrottled"
    #: a CONNECT whose credentials did not log in (unknown user, wrong password)
    AUTHENTICATION = "connectionsRefusedAuthentication"


class Closed(Enum):
    """Why the broker closed a connection it had let in (value: its usage key)."""

    CONNECT_TIMEOUT = "connectionsClosedConnectTimeout"
    IDLE_TIMEOUT = "connectionsClosedIdle"
    HEARTBEAT = "connectionsClosedHeartbeat"


class ListenerStats:
    """Counters by reason since the broker started, and the input budget."""

    def __init__(self, input_budget: int = DEFAULT_INPUT_BUDGET) -> None:
        self.refused: dict[Refused, int] = dict.fromkeys(Refused, 0)
        self.closed: dict[Closed, int] = dict.fromkeys(Closed, 0)
        self.input = InputBudget(input_budget)

    def refuse(self, reason: Refused) -> None:
        self.refused[reason] += 1

    def close(self, reason: Closed) -> None:
        self.closed[reason] += 1

    def as_usage(self) -> dict[str, int]:
        """The ``Broker.usage()`` entries: refusals in total and by reason, closes by
        reason, and the input budget (bytes held, limit, connections paused now, pauses
        so far)."""
        out = {"connectionsRefused": sum(self.refused.values())}
        out.update((reason.value, n) for reason, n in self.refused.items())
        out.update((reason.value, n) for reason, n in self.closed.items())
        budget = self.input
        out.update(inputBytes=budget.used, inputBudget=budget.limit,
                   inputPaused=budget.paused, inputPauses=budget.pauses)
        return out
