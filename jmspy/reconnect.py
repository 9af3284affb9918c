"""Reconnect policy shared by the network transports (``imqReconnect*`` properties).

The transports own the reconnect loop (they know how to connect); this module only turns
the factory properties into waits, so stomp:// and mqtt:// back off alike.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_INTERVAL", "ReconnectPolicy"]

#: The doubling backoff stops growing here (seconds).
MAX_INTERVAL = 30.0


@dataclass(frozen=True, slots=True)
class ReconnectPolicy:
    """``enabled``, ``attempts`` (-1 = forever) and the first wait ``interval`` (seconds)."""

    enabled: bool = False
    attempts: int = 6
    interval: float = 3.0

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ReconnectPolicy:
        return cls(
            bool(properties.get("imqReconnectEnabled", False)),
            int(properties.get("imqReconnectAttempts", 6)),
            int(properties.get("imqReconnectInterval", 3000)) / 1000.0,
        )

    def _base(self, attempt: int) -> float:
        return float(min(MAX_INTERVAL, self.interval * (2 ** min(attempt, 32))))

    def delays(self) -> Iterator[float]:
        """The wait before each attempt: doubling from ``interval`` up to 30 s, +-20%
        jitter so many clients of one restarted broker do not reconnect in lockstep."""
        attempt = 0
        while self.attempts < 0 or attempt < self.attempts:
            yield self._base(attempt) * random.uniform(0.8, 1.2)
            attempt += 1
