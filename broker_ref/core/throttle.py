"""Failed-login throttling: who has failed to log in too often lately (sans-I/O).

Password hashing is deliberately slow, so a client that keeps guessing costs the broker a
hash per guess, and guesses at a user's password are what an attacker wants to make
cheaply. The throttle counts failed logins in a sliding window, separately per source
address and per user name (an attacker who spreads guesses over addresses still hits the
user's count; one who spreads them over users still hits the address's). While the larger
of the two counts is below ``delay_after`` an attempt is answered at once; from there on
each attempt is delayed by ``delay_ms`` (the host waits without working: the hash is not
computed any sooner); from ``refuse_after`` on it is refused without hashing at all, until
old failures leave the window. A success clears the user's count (not the address's: a
valid account must not launder an address's guesses).

No clock or I/O of its own: the host passes a clock (ms) and does the waiting.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LoginThrottle", "ThrottleSettings", "Verdict"]

log = logging.getLogger("jmspy.broker_ref.security")

#: Most addresses and user names remembered (oldest forgotten first): made-up user names
#: must not grow the broker without bound.
_MAX_KEYS = 10_000


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    """The ``[limits]`` keys ``login-window-ms``, ``login-delay-after``, ``login-delay-ms``
    and ``login-refuse-after``."""

    window_ms: int = 60_000
    delay_after: int = 3
    delay_ms: int = 1_000
    refuse_after: int = 10

    def __post_init__(self) -> None:
        for name in ("window_ms", "delay_after", "delay_ms", "refuse_after"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"ThrottleSettings.{name} must be an int >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one login attempt: wait ``delay_ms`` first, or refuse it
    (``refusal`` says why and when to retry) without checking the password."""

    delay_ms: int = 0
    refusal: str | None = None


class LoginThrottle:
    def __init__(self, settings: ThrottleSettings, clock: Callable[[], int]) -> None:
        self.settings = settings
        self._clock = clock
        self._failures: OrderedDict[tuple[str, str], deque[int]] = OrderedDict()
        #: attempts refused without a password check (for stats and tests)
        self.refused = 0

    def _recent(self, key: tuple[str, str], now: int) -> deque[int]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        horizon = now - self.settings.window_ms
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def _keys(self, address: str | None, user: str | None) -> list[tuple[str, str]]:
        keys = []
        if address:
            keys.append(("address", address))
        if user:
            keys.append(("user", user))
        return keys

    def verdict(self, address: str | None, user: str | None) -> Verdict:
        """The verdict for an attempt from ``address`` as ``user``, now."""
        s = self.settings
        now = self._clock()
        count, key, times = 0, None, deque[int]()
        for k in self._keys(address, user):
            recent = self._recent(k, now)
            if len(recent) > count:
                count, key, times = len(recent), k, recent
        if s.refuse_after and count >= s.refuse_after and key is not None:
            self.refused += 1
            retry = max(1, (times[0] + s.window_ms - now + 999) // 1000)
            what = f"for user {key[1]!r}" if key[0] == "user" else f"from {key[1]}"
            return Verdict(refusal=(
                f"too many failed logins {what}: {count} in the last "
                f"{s.window_ms // 1000} s; try again in {retry} s with the right "
                "credentials"))
        if count >= s.delay_after and s.delay_ms:
            return Verdict(delay_ms=s.delay_ms)
        return Verdict()

    def failed(self, address: str | None, user: str | None) -> None:
        s = self.settings
        now = self._clock()
        for key in self._keys(address, user):
            times = self._recent(key, now)
            if not times:
                self._failures[key] = times
            self._failures.move_to_end(key)
            times.append(now)
            if len(times) in (s.delay_after, s.refuse_after) and len(times):
                action = "refusing" if len(times) == s.refuse_after else "delaying"
                log.warning("%d failed logins %s %s in %d s: %s further attempts",
                            len(times), "for user" if key[0] == "user" else "from",
                            key[1] if key[0] == "address" else repr(key[1]),
                            s.window_ms // 1000, action)
        while len(self._failures) > _MAX_KEYS:
            self._failures.popitem(last=False)

    def succeeded(self, address: str | None, user: str | None) -> None:
        if user:
            self._failures.pop(("user", user), None)
