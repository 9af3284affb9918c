"""What a STOMP CONNECT asks for: the protocol version both sides speak, and the login
request a host checks off its event loop (password hashing is slow) before the session
answers CONNECTED. Reading the frame is here; acting on it is the session's
(:mod:`.protocol`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from jmspy.stomp_frames import Frame

from .mapping import header_int
from .refusals import ProtocolError
from .subscription import MAX_LIMIT

__all__ = ["CONNECTION_FLOW_LIMIT", "SUPPORTED_VERSIONS", "LoginRequest", "negotiate",
           "read_connect"]

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


def read_connect(frame: Frame) -> LoginRequest | Frame:
    """What a CONNECT (or STOMP) ``frame`` asks for; or, when it offers no version in
    common, the ERROR frame to answer with (it lists the supported versions, in a header
    too; the session sends it as STOMP 1.0, the one version every client reads). Raises
    :class:`~.refusals.ProtocolError` for a malformed heart-beat and
    :class:`~.mapping.HeaderError` for a malformed connection flow limit."""
    offered = frame.header("accept-version")
    version = negotiate(offered)
    if version is None:
        return Frame(
            "ERROR",
            [("version", ",".join(SUPPORTED_VERSIONS)), ("content-type", "text/plain"),
             ("message", "unsupported STOMP version")],
            f"Supported protocol versions are {' '.join(SUPPORTED_VERSIONS)}; offer one "
            f"of them in accept-version (you offered {offered!r}).".encode())
    hb = frame.header("heart-beat") or "0,0"
    try:
        cx, cy = (int(p) for p in hb.split(","))
        if cx < 0 or cy < 0:
            raise ValueError
    except ValueError:
        raise ProtocolError("invalid heart-beat header", f"heart-beat:{hb!r} must be "
                            "two non-negative integers 'cx,cy' (milliseconds)") from None
    flow = frame.header(CONNECTION_FLOW_LIMIT)
    return LoginRequest(frame.header("login"), frame.header("passcode"),
                        frame.header("client-id"), version, cx, cy,
                        header_int(CONNECTION_FLOW_LIMIT, flow, 0, MAX_LIMIT) if flow else 0)
