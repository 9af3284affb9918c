"""The paho client one ``mqtt://`` connection runs on.

paho-mqtt 2 with its callback API version 2, ``manual_ack=True`` (acknowledging is the
transport's business, see :mod:`.inbound`) and its own reconnect off (the transport's
failover reconnects). On the paho releases the tests ran, four steps of that client
*instance* are jmspy's (:mod:`.paho_private`, the one module that touches paho's private
names); on any other, paho's own.
"""

from __future__ import annotations

from typing import Any

from . import lent_reading, paho_private

__all__ = ["connect_options", "new_client"]


def new_client(paho: Any, version: str, client_id: str | None) -> Any:
    """A paho client (module ``paho``: ``paho.mqtt.client``) for MQTT ``version`` ("5" or
    "3.1.1"); without ``client_id`` the broker names it and keeps no session."""
    from paho.mqtt.enums import CallbackAPIVersion

    v5 = version == "5"
    kwargs: dict[str, Any] = {}
    if not v5:
        kwargs["clean_session"] = client_id is None
    client = paho.Client(
        CallbackAPIVersion.VERSION2,
        client_id=client_id or "",
        protocol=paho.MQTTv5 if v5 else paho.MQTTv311,
        reconnect_on_failure=False,
        manual_ack=True,
        **kwargs,
    )
    paho_private.install(client)
    lent_reading.install(client)  # an event loop may read (with jmspy's block reads)
    return client


def connect_options(version: str, client_id: str | None, receive_maximum: int,
                    session_expiry: int) -> dict[str, Any]:
    """The keyword arguments of paho's ``connect`` beyond host, port and keepalive: for
    MQTT 5 the CONNECT's Receive Maximum, a named client's Session Expiry Interval and
    Clean Start (a client the broker names keeps no session); none for 3.1.1 (its clean
    session is the client's, see :func:`new_client`)."""
    if version != "5":
        return {}
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    props: Any = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    props.ReceiveMaximum = receive_maximum
    if client_id is not None:
        props.SessionExpiryInterval = session_expiry
    return {"clean_start": client_id is None, "properties": props}
