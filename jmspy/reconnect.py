"""Reconnect policy shared by the network transports (``imqReconnect*`` properties).

The transports know how to connect and re-subscribe; this module owns what is common to
them: the factory properties turned into waits, and the loop that retries with them, so
stomp:// and mqtt:// back off, count attempts and give up alike.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import JMSException, JMSSecurityException

__all__ = ["CLOSED", "MAX_INTERVAL", "ReconnectPolicy", "retry_with_backoff"]

#: What :func:`retry_with_backoff` returns when the connection was closed meanwhile.
CLOSED = "closed"

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


def retry_with_backoff(
    policy: ReconnectPolicy, attempt: Callable[[], None], closing: Callable[[], bool]
) -> str | None:
    """Call ``attempt`` after each of the policy's waits until it returns normally.

    Returns None once an attempt succeeded, :data:`CLOSED` when ``closing()`` turned true
    first, else why it gave up. ``attempt`` raises JMSException to be retried, and
    JMSSecurityException to stop at once: the same credentials will not start working.
    """
    attempts = 0
    last = "no attempt made"
    for delay in policy.delays():
        if closing():
            return CLOSED
        time.sleep(delay)
        if closing():
            return CLOSED
        attempts += 1
        try:
            attempt()
        except JMSSecurityException as exc:
            last = str(exc)
            break
        except JMSException as exc:
            last = str(exc)
            continue
        return None
    return f"gave up after {attempts} reconnect attempts: {last}"
