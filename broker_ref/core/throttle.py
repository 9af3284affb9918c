"""Failed-login throttling: who has failed to log in too often lately (sans-I/O).

Password hashing is deliberately slow, so a client that keeps guessing costs the broker a
hash per guess, and guesses at a user's password are what an attacker wants to make
cheaply. The throttle must slow the *attacker* without locking out the *victim*: counting
failures per user name alone would let anyone who knows a user name lock its owner out
from everywhere (ten wrong passwords, and the right one is refused from every address).

So failures are counted in a sliding window per (source address, user name) pair: wrong
passwords for alice from A slow down and then refuse alice *from A*; alice's right password
from B is checked at once, and bob from A is unaffected. While a pair's count is below
``delay_after`` an attempt is answered at once; from there on each attempt is delayed by
``delay_ms`` (the host waits without working: the hash is not computed any sooner); from
``refuse_after`` on it is refused without hashing at all, until old failures leave the
window. On top of that one address has a budget across all user names,
``address_refuse_after`` (higher than the per-pair one): an address that sprays guesses
over many user names is refused for every user name once it is spent.

A success clears that pair's count (not the address's: a valid account must not launder an
address's guesses at others). Guesses spread over many addresses are bounded per address
only; that is the price of never refusing a user's right password from a clean address.

No clock or I/O of its own: the host passes a clock (ms) and does the waiting.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass

__all__ = ["LoginThrottle", "ThrottleSettings", "Verdict"]

log = logging.getLogger("jmspy.broker.security")


def _who(user: str | None) -> str:
    """The user a throttled login names: a missing one reads as such, not as None."""
    return f"for user {user!r}" if user else "with no user name given"

#: Most (address, user) pairs and addresses remembered, each (oldest forgotten first):
#: made-up user names must not grow the broker without bound.
_MAX_KEYS = 10_000


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    """The ``[limits]`` keys ``login-window-ms``, ``login-delay-after``, ``login-delay-ms``,
    ``login-refuse-after`` (per address and user name) and ``login-address-refuse-after``
    (per address, across user names). ``0`` turns a refusal off."""

    window_ms: int = 60_000
    delay_after: int = 3
    delay_ms: int = 1_000
    refuse_after: int = 10
    address_refuse_after: int = 30

    def __post_init__(self) -> None:
        for name in ("window_ms", "delay_after", "delay_ms", "refuse_after",
                     "address_refuse_after"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"ThrottleSettings.{name} must be an int >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one login attempt: wait ``delay_ms`` first, or refuse it
    (``refusal`` says why and when to retry, ``retry_after_s`` when as a number) without
    checking the password."""

    delay_ms: int = 0
    refusal: str | None = None
    retry_after_s: int = 0


class _Window:
    """Failure times per key over a sliding window, the oldest keys forgotten first."""

    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms
        self._times: OrderedDict[Hashable, deque[int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._times)

    def recent(self, key: Hashable, now: int) -> deque[int]:
        """The failures of ``key`` still in the window (oldest first)."""
        times = self._times.get(key)
        if times is None:
            return deque()
        horizon = now - self.window_ms
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._times[key]
        return times

    def add(self, key: Hashable, now: int) -> int:
        """Count a failure of ``key`` now; how many it has in the window."""
        times = self.recent(key, now)
        if not times:
            self._times[key] = times
        self._times.move_to_end(key)
        times.append(now)
        while len(self._times) > _MAX_KEYS:
            self._times.popitem(last=False)
        return len(times)

    def clear(self, key: Hashable) -> None:
        self._times.pop(key, None)

    def retry_s(self, times: deque[int], now: int) -> int:
        """Seconds until the oldest of ``times`` leaves the window (at least 1)."""
        return max(1, (times[0] + self.window_ms - now + 999) // 1000)


class LoginThrottle:
    def __init__(self, settings: ThrottleSettings, clock: Callable[[], int]) -> None:
        self.settings = settings
        self._clock = clock
        self._pairs = _Window(settings.window_ms)  # (address, user) -> failure times
        self._addresses = _Window(settings.window_ms)  # address -> failure times
        #: attempts refused without a password check (for stats and tests)
        self.refused = 0

    def verdict(self, address: str | None, user: str | None) -> Verdict:
        """The verdict for an attempt from ``address`` as ``user``, now."""
        s = self.settings
        now = self._clock()
        window_s = s.window_ms // 1000
        spread = self._addresses.recent(address, now)
        if s.address_refuse_after and len(spread) >= s.address_refuse_after:
            self.refused += 1
            retry = self._addresses.retry_s(spread, now)
            return Verdict(refusal=(
                f"too many failed logins from {address}: {len(spread)} across user names "
                f"in the last {window_s} s ([limits] login-address-refuse-after = "
                f"{s.address_refuse_after}); try again in {retry} s with the right "
                "credentials"), retry_after_s=retry)
        times = self._pairs.recent((address, user), now)
        if s.refuse_after and len(times) >= s.refuse_after:
            self.refused += 1
            retry = self._pairs.retry_s(times, now)
            return Verdict(refusal=(
                f"too many failed logins {_who(user)} from {address}: {len(times)} in "
                f"the last {window_s} s ([limits] login-refuse-after = {s.refuse_after}); "
                f"try again in {retry} s with the right credentials"), retry_after_s=retry)
        if len(times) >= s.delay_after and s.delay_ms:
            return Verdict(delay_ms=s.delay_ms)
        return Verdict()

    def failed(self, address: str | None, user: str | None) -> None:
        s = self.settings
        now = self._clock()
        count = self._pairs.add((address, user), now)
        if count in (s.delay_after, s.refuse_after):
            action = "refusing" if count == s.refuse_after else "delaying"
            log.warning("%d failed logins %s from %s in %d s: %s further attempts "
                        "of that user from that address", count, _who(user), address,
                        s.window_ms // 1000, action)
        spread = self._addresses.add(address, now)
        if spread == s.address_refuse_after:
            log.warning("%d failed logins from %s across user names in %d s: refusing "
                        "further attempts from that address", spread, address,
                        s.window_ms // 1000)

    def succeeded(self, address: str | None, user: str | None) -> None:
        self._pairs.clear((address, user))
