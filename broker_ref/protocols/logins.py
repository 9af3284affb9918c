"""How a listener checks a client's credentials, for STOMP and MQTT alike: the
failed-login throttle first (per address and user name: a guesser is slowed, then
refused, before any hash is computed), then the user a verified client certificate
names (no password: the CA vouched for it) or the password, hashed on a thread of its
own so that a slow hash, or a flood of logins, does not stop the event loop that serves
everyone else.

One :class:`Logins` per broker process: ``jmspy broker``'s STOMP and MQTT listeners
share it, so failed logins count against an address whichever protocol they came by.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext

from jmspy.errors import JMSException

from ..core import Broker, BrokerError
from ..core.listener_stats import Refused
from ..core.security import Principal
from ..core.throttle import LoginThrottle

__all__ = ["LoginRefused", "Logins"]


class LoginRefused(JMSException):
    """A login the broker refuses: ``reason`` (what the listener statistics count),
    ``message`` (short, for the client's refusal), ``detail`` (the whole story, for the
    log and STOMP's ERROR body) and ``code`` (the broker error's code, if one was why)."""

    def __init__(self, reason: Refused, message: str, detail: str,
                 code: str | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.message = message
        self.detail = detail
        self.code = code

    @property
    def throttled(self) -> bool:
        return self.reason is Refused.LOGIN_THROTTLED


class Logins:
    """The credential checks of a broker's listeners (see the module docstring)."""

    def __init__(self, broker: Broker, throttle: LoginThrottle,
                 core_lock: AbstractContextManager[object] | None = None) -> None:
        self._broker = broker
        self._core_lock = core_lock or nullcontext()  # held to count a refusal
        self.throttle = throttle
        #: One thread checks passwords: the loop keeps the other core, and a flood of
        #: logins queues there instead of stalling everyone.
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="jmspy-login")

    async def check(self, address: str | None, user: str | None, password: str | None,
                    certificate_user: str | None = None) -> Principal:
        """The principal of a client at ``address`` logging in as ``user``; raises
        :class:`LoginRefused`, counted in the broker's listener statistics. Call it only
        when the broker's security is enabled."""
        try:
            return await self._check(address, user, password, certificate_user)
        except LoginRefused as no:
            with self._core_lock:
                self._broker.listeners.refuse(no.reason)
            raise

    async def _check(self, address: str | None, user: str | None, password: str | None,
                     certificate_user: str | None) -> Principal:
        policy = self._broker.security
        assert policy is not None, "no security policy: nothing to check"
        verdict = self.throttle.verdict(address, user)
        if verdict.refusal is not None:
            raise LoginRefused(Refused.LOGIN_THROTTLED, "too many failed logins",
                               verdict.refusal)
        if verdict.delay_ms:
            await asyncio.sleep(verdict.delay_ms / 1000)
        try:
            if certificate_user is not None:
                principal = policy.authenticate_certificate(certificate_user, user)
            else:
                principal = await asyncio.get_running_loop().run_in_executor(
                    self._pool, policy.authenticate, user, password)
        except BrokerError as exc:
            if user or password:
                self.throttle.failed(address, user)
            raise LoginRefused(Refused.AUTHENTICATION, exc.message.split(";")[0][:200],
                               exc.message, exc.code) from None
        self.throttle.succeeded(address, user)
        return principal

    def close(self) -> None:
        """Stop the password thread (checks still queued are dropped)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
