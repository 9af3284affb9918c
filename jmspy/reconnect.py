"""Reconnect policy shared by the network transports (``imqReconnect*`` properties).

The transports know how to connect and re-subscribe; this module owns what is common to
them: the factory properties turned into a plan of attempts along the address list
(:meth:`ReconnectPolicy.plan`), the first connection along it (:func:`connect_first`),
the loop that retries with it, and the thread that runs it
(:func:`reconnect_in_background`), so stomp://, mqtt:// and vm:// back off, move between
brokers, count attempts, give up and resume alike.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import JMSException, JMSSecurityException
from .logs import client_logger

__all__ = [
    "CLOSED",
    "MAX_INTERVAL",
    "ReconnectPolicy",
    "Reconnecting",
    "Rng",
    "connect_first",
    "reconnect_in_background",
    "retry_with_backoff",
]

#: What :func:`retry_with_backoff` returns when the connection was closed meanwhile.
CLOSED = "closed"

#: The doubling backoff stops growing here (seconds).
MAX_INTERVAL = 30.0


class Rng(Protocol):
    """What the policy draws on (``random.Random``; tests inject a scripted one)."""

    def uniform(self, a: float, b: float) -> float: ...

    def shuffle(self, x: list[Any]) -> None: ...


@dataclass(frozen=True, slots=True)
class ReconnectPolicy:
    """``enabled``, ``attempts`` per address (-1 = forever), the first wait ``interval``
    (seconds), and how an address list is walked: ``behavior`` PRIORITY or RANDOM,
    ``iterations`` passes over the list (-1 = forever)."""

    enabled: bool = False
    attempts: int = 6
    interval: float = 3.0
    behavior: str = "PRIORITY"
    iterations: int = 1

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ReconnectPolicy:
        return cls(
            bool(properties.get("imqReconnectEnabled", False)),
            int(properties.get("imqReconnectAttempts", 6)),
            int(properties.get("imqReconnectInterval", 3000)) / 1000.0,
            str(properties.get("imqAddressListBehavior") or "PRIORITY").upper(),
            int(properties.get("imqAddressListIterations", 1)),
        )

    def _base(self, attempt: int) -> float:
        return float(min(MAX_INTERVAL, self.interval * (2 ** min(attempt, 32))))

    def plan(self, addresses: int = 1, rng: Rng | None = None) -> Iterator[tuple[int, float]]:
        """Every attempt of one reconnect: (index into the address list, seconds to wait
        before it).

        Each of ``iterations`` passes takes the addresses in order (PRIORITY) or in a new
        shuffled order (RANDOM) and makes ``attempts`` attempts at each. A wait doubles
        from ``interval`` up to :data:`MAX_INTERVAL` with +-20% jitter, so many clients of
        one restarted broker do not reconnect in lockstep -- except that with several
        addresses the first attempt at each address of a pass goes at once, the very first
        one of a reconnect included: that broker has not failed yet (or only this
        connection to it was lost), a dead one refuses at once, and moving on quickly is
        what a cluster is for. Waits separate the retries of one address, and the
        passes. ``attempts=-1`` with one address retries it forever; with several, it
        makes one attempt per address per pass (an address tried forever would never let
        the list move on)."""
        draw: Rng = rng if rng is not None else _RANDOM
        per_address = self.attempts if addresses == 1 or self.attempts >= 0 else 1
        waits = 0
        iteration = 0
        while self.iterations < 0 or iteration < self.iterations:
            order = list(range(addresses))
            if self.behavior == "RANDOM":
                draw.shuffle(order)
            for position, index in enumerate(order):
                attempt = 0
                while per_address < 0 or attempt < per_address:
                    if attempt == 0 and (position > 0 or (addresses > 1 and iteration == 0)):
                        yield index, 0.0
                    else:
                        yield index, self._base(waits) * draw.uniform(0.8, 1.2)
                        waits += 1
                    attempt += 1
            iteration += 1

    def delays(self) -> Iterator[float]:
        """The waits of a one-address plan (what a single broker URL does)."""
        for _, delay in self.plan(1):
            yield delay


_RANDOM: Rng = random.Random()
log = client_logger("reconnect")


def connect_first(
    policy: ReconnectPolicy, addresses: list[str], attempt: Callable[[int], None], *,
    rng: Rng | None = None, sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Open a connection: ``attempt(index)`` at each address as the policy orders them,
    one attempt per address per pass, ``imqAddressListIterations`` passes, waiting
    between passes only. Raises the one failure of a single address as it is; with
    several, a JMSException naming every address and why it failed. A refused login
    (JMSSecurityException) is raised at once: the next broker of a cluster would refuse
    it too."""
    failures: list[tuple[str, JMSException]] = []
    once = ReconnectPolicy(True, 1, policy.interval, policy.behavior,
                           max(1, policy.iterations))
    for n, (index, delay) in enumerate(once.plan(len(addresses), rng)):
        if n and delay:
            sleep(delay)
        try:
            attempt(index)
            return
        except JMSSecurityException:
            raise
        except JMSException as exc:
            log.debug("connecting to %s failed: %s", addresses[index], exc)
            failures.append((addresses[index], exc))
    if len(failures) == 1:
        raise failures[0][1]
    raise JMSException(
        "could not connect to any broker of the address list: "
        + "; ".join(f"{where}: {exc}" for where, exc in failures)
    ) from failures[-1][1]


def retry_with_backoff(
    policy: ReconnectPolicy, attempt: Callable[[int], None], closing: Callable[[], bool],
    *, addresses: int = 1, rng: Rng | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Call ``attempt(index)`` along the policy's :meth:`~ReconnectPolicy.plan` (its
    waits slept with ``sleep``) until one returns normally.

    Returns None once an attempt succeeded, :data:`CLOSED` when ``closing()`` turned true
    first, else why it gave up. ``attempt`` raises JMSException to be retried, and
    JMSSecurityException to stop at once: the same credentials will not start working.
    """
    attempts = 0
    last = "no attempt made"
    for index, delay in policy.plan(addresses, rng):
        if closing():
            return CLOSED
        if delay:
            sleep(delay)
        if closing():
            return CLOSED
        attempts += 1
        log.debug("reconnect attempt %d (address %d of %d, after %.3g s)", attempts,
                  index + 1, addresses, delay)
        try:
            attempt(index)
        except JMSSecurityException as exc:
            last = str(exc)
            log.debug("reconnect attempt %d refused, giving up: %s", attempts, exc)
            break
        except JMSException as exc:
            last = str(exc)
            log.debug("reconnect attempt %d failed: %s", attempts, exc)
            continue
        log.debug("reconnect attempt %d succeeded", attempts)
        return None
    return f"gave up after {attempts} reconnect attempts: {last}"


class Reconnecting(Protocol):
    """What :func:`reconnect_in_background` drives: a transport whose connection dropped."""

    @property
    def reconnect(self) -> ReconnectPolicy: ...

    def _reconnect_closing(self) -> bool:
        """Whether the transport was closed (stop trying)."""

    @property
    def _reconnect_addresses(self) -> int:
        """How many broker addresses the transport may reconnect to (its address list)."""

    def _reconnect_once(self, address: int) -> None:
        """One attempt: connect to address ``address`` of the list and re-create every
        subscription; raise JMSException to be tried again (JMSSecurityException: stop at
        once)."""

    def _reconnected(self) -> None:
        """An attempt succeeded: tell the core (or, closed meanwhile, drop the new link)."""

    def _reconnect_failed(self, why: str) -> None:
        """Every attempt failed: ``why`` says how often and the last reason."""


def reconnect_in_background(
    transport: Reconnecting, name: str, *, before: Callable[[], None] | None = None,
    on_closed: Callable[[], None] | None = None,
) -> threading.Thread:
    """Start the thread that reconnects ``transport`` (``before`` runs first on it; a close
    while waiting ends it, calling ``on_closed``)."""

    def run() -> None:
        if before is not None:
            before()
        outcome = retry_with_backoff(
            transport.reconnect, transport._reconnect_once, transport._reconnect_closing,
            addresses=transport._reconnect_addresses,
        )
        if outcome == CLOSED:
            if on_closed is not None:
                on_closed()
        elif outcome is not None:
            transport._reconnect_failed(outcome)
        else:
            transport._reconnected()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread
