"""Who an HTTP request is: HTTP basic credentials checked against the broker's users.

The same users, passwords and roles as STOMP (``[security.users]``, checked by
:meth:`~jmspy.broker_ref.core.security.SecurityPolicy.authenticate`), and the same
``admin`` permission per destination as ``/jmspy/stats`` and ``jmspy stat``. Password
hashing is slow by design (PBKDF2), so it runs in a worker thread, never on the broker's
loop; a principal is cached per (user, password digest) for a short while so that a
console polling every second does not hash every second.

With security off (no ``[security]`` section) every request is served, as every STOMP
connection is. With security on, a request without valid credentials gets 401 (with a
``WWW-Authenticate`` challenge) and one whose user lacks the permission 403.

Failed logins are throttled as STOMP's are, by the same
:class:`~jmspy.broker_ref.core.throttle.LoginThrottle` (the STOMP listener's, when the
broker runs one: guesses over HTTP and over STOMP from one address share one budget, so
an attacker gains nothing by switching protocols): per (address, user) a delay from
``login-delay-after`` failures and a refusal (HTTP 429, with ``Retry-After``) from
``login-refuse-after``, and per address ``login-address-refuse-after`` across users.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import time
from collections.abc import Callable

from jmspy.errors import JMSException

from ..core.errors import AuthenticationFailed
from ..core.security import Principal, SecurityPolicy
from ..core.throttle import LoginThrottle

__all__ = ["Authenticator", "Throttled", "Unauthorized"]

#: how long a checked login is trusted again without hashing (seconds)
CACHE_SECONDS = 30.0
_CACHE_LIMIT = 256


class Unauthorized(JMSException):
    """No valid credentials (HTTP 401); the message says what to send instead."""


class Throttled(JMSException):
    """Too many failed logins lately (HTTP 429): refused without checking the password;
    ``retry_after_s`` is when the oldest failure leaves the throttle's window."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Authenticator:
    """Turns an ``Authorization`` header into a principal (None with security off)."""

    def __init__(self, security: SecurityPolicy | None, throttle: LoginThrottle,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._security = security
        self._throttle = throttle
        self._clock = clock
        self._cache: dict[tuple[str, bytes], tuple[float, Principal]] = {}
        #: logins refused for wrong or missing credentials (the refused-logins metric)
        self.refused = 0
        #: of those, refused by the throttle without a password check
        self.throttled = 0

    @property
    def enabled(self) -> bool:
        return self._security is not None and self._security.enabled

    async def principal(self, header: str | None, address: str | None = None
                        ) -> Principal | None:
        """The principal for ``header`` (an ``Authorization`` value or None) from the
        client at ``address``: :class:`Unauthorized` when security is on and it does
        not log in, :class:`Throttled` when that address failed too often lately."""
        security = self._security
        if security is None or not security.enabled:
            return None
        user, password = self._parse(header)
        key = (user, hashlib.sha256(password.encode()).digest())
        now = self._clock()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]  # this very password logged in lately: no hash, no guess
        throttle = self._throttle
        verdict = throttle.verdict(address, user)
        if verdict.refusal is not None:
            self.refused += 1
            self.throttled += 1
            raise Throttled(verdict.refusal, verdict.retry_after_s)
        if verdict.delay_ms:
            await asyncio.sleep(verdict.delay_ms / 1000)
        try:
            principal = await asyncio.to_thread(security.authenticate, user, password)
        except AuthenticationFailed as exc:
            self.refused += 1
            throttle.failed(address, user)
            raise Unauthorized(exc.message) from None
        throttle.succeeded(address, user)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = (now + CACHE_SECONDS, principal)
        return principal

    def _parse(self, header: str | None) -> tuple[str, str]:
        if not header:
            self.refused += 1
            raise Unauthorized(
                "authentication required: this broker has security enabled; send HTTP "
                "basic credentials of a [security.users] user (curl -u user:password)")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            self.refused += 1
            raise Unauthorized(f"unsupported Authorization scheme {scheme!r}; use HTTP "
                               "basic (curl -u user:password)")
        try:
            user, sep, password = base64.b64decode(value.strip(), validate=True).decode(
                "utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            sep, user, password = "", "", ""
        if not sep or not user:
            self.refused += 1
            raise Unauthorized("malformed HTTP basic credentials: expected base64 of "
                               "'user:password'")
        return user, password
