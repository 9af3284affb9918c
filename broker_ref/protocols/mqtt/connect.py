"""An MQTT CONNECT read and checked before anything acts on it.

The checks here need nothing but the packet and the listener's settings (the protocol
level, the client id rules, the keep-alive cap), so they answer before any credential
is looked at. What they give, a :class:`ConnectRequest`, is all the session needs to
connect once the credentials are checked: on the spot, or, when the host checks them
off its event loop (``MqttSession.defer_login``), later in ``login_done``. Until then the
connection takes nobody's session over and cancels no will: a client that cannot log
in cannot end the session of one that can.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from jmspy.errors import JMSException

from .codec import V5

__all__ = ["ConnectRefused", "ConnectRequest", "protocol_version", "read_connect"]

#: Session Expiry Interval meaning "never expires"
NEVER = 0xFFFFFFFF


class ConnectRefused(JMSException):
    """The CONNECT is refused before login with the CONNACK ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(f"CONNACK {code:#x}")
        self.code = code


@dataclass(frozen=True, slots=True)
class ConnectRequest:
    """A checked CONNECT (see the module docstring)."""

    client_id: str
    #: the client id the server made up (v5 tells it in CONNACK); None: the client's own
    assigned: str | None
    clean: bool
    #: the session expiry interval in seconds (0: ends with the connection; None: never)
    expiry: int | None
    #: the keep-alive in force (s, 0: off): the client's, or the server's cap
    keep_alive: int
    #: the Server Keep Alive to tell a v5 client (0: the client's own is kept)
    server_keep_alive: int
    user: str | None
    password: str | None = field(repr=False)
    #: the client's Receive Maximum: the core connection's flow limit
    receive_maximum: int
    #: the client's Maximum Packet Size (0: none)
    max_packet: int
    #: the client's Topic Alias Maximum: aliases the broker may give topics it sends
    topic_alias_maximum: int
    will: dict[str, Any] | None


def protocol_version(f: dict[str, Any]) -> int:
    """The version the session answers in: 5 for a v5 CONNECT, 4 (3.1.1) otherwise."""
    return V5 if f["level"] == V5 else 4


def read_connect(f: dict[str, Any], max_keep_alive: int) -> ConnectRequest:
    """The request of CONNECT fields ``f``; raises :class:`ConnectRefused`.

    ``max_keep_alive`` (s, 0: none) caps the keep-alive as Mosquitto's ``max_keepalive``:
    a v5 client asking more (or none) is told the cap, a 3.1.1 client asking more is
    refused, as it cannot be told."""
    v5 = protocol_version(f) == V5
    if f.get("unsupported"):
        raise ConnectRefused(0x84 if v5 else 0x01)
    props = f["properties"]
    client_id, assigned = f["client_id"], None
    if not client_id:
        if not v5 and not f["clean"]:
            raise ConnectRefused(0x02)  # 3.1.1: a persistent session needs a client id
        client_id = assigned = "auto-" + uuid.uuid4().hex
    expiry: int | None
    if v5:
        expiry = props.get("session_expiry_interval", 0)
        if expiry == NEVER:
            expiry = None
    else:
        expiry = 0 if f["clean"] else None
    keep_alive, most = f["keep_alive"], max_keep_alive
    if most and not v5 and keep_alive > most:
        raise ConnectRefused(0x02)  # what Mosquitto answers: identifier rejected
    told = most if v5 and most and (keep_alive == 0 or keep_alive > most) else 0
    password = f["password"]
    return ConnectRequest(
        client_id=client_id, assigned=assigned, clean=bool(f["clean"]), expiry=expiry,
        keep_alive=told or keep_alive, server_keep_alive=told, user=f["username"],
        password=password.decode("utf-8", "replace") if password is not None else None,
        receive_maximum=min(props.get("receive_maximum", 65535), 65535),
        max_packet=props.get("maximum_packet_size", 0),
        topic_alias_maximum=props.get("topic_alias_maximum", 0), will=f.get("will"))
