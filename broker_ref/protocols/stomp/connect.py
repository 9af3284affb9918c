"""What a STOMP CONNECT asks for: the protocol version both sides speak, and the login
request a host checks off its event loop (password hashing is slow) before the session
answers CONNECTED."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CONNECTION_FLOW_LIMIT", "SUPPORTED_VERSIONS", "LoginRequest", "negotiate"]

SUPPORTED_VERSIONS = ("1.0", "1.1", "1.2")
#: CONNECT header: Open MQ's imqConnectionFlowLimit, enforced by this broker over the
#: connection's client-acknowledged subscriptions (echoed on CONNECTED when accepted).
CONNECTION_FLOW_LIMIT = "jmspy-connection-flow-limit"


@dataclass(frozen=True, slots=True)
class LoginRequest:
    """A CONNECT waiting for its credentials to be checked (see ``defer_login``)."""

    user: str | None
    password: str | None = field(repr=False)
    client_id: str | None
    version: str
    cx: int
    cy: int
    flow_limit: int = 0  #: jmspy-connection-flow-limit (0: no connection-wide cap)


def negotiate(accept: str | None) -> str | None:
    """The highest version in ``accept-version`` that this server speaks (no header:
    STOMP 1.0), or None when there is none in common."""
    if accept is None:
        return "1.0"
    offered = {v.strip() for v in accept.split(",")}
    for version in reversed(SUPPORTED_VERSIONS):
        if version in offered:
            return version
    return None
