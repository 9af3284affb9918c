"""The paho client one ``mqtt://`` connection runs on.

paho-mqtt 2 with its callback API version 2, ``manual_ack=True`` (acknowledging is the
transport's business, see :mod:`.inbound`) and its own reconnect off (the transport's
failover reconnects). Four steps of that client *instance* are jmspy's, each in its
module with the measurements that justify it and each leaving paho's step in place where
it cannot apply: decoding a received PUBLISH (:mod:`.receive`), reading a received PUBACK
(:mod:`.puback`), writing a QoS 1 PUBLISH or a PUBACK on the thread that makes it, and
joining queued ones into one write (:mod:`.direct_write`) and reading the socket a block
at a time (:mod:`.buffered_read`).
"""

from __future__ import annotations

from typing import Any

from .buffered_read import install as install_buffered_reads
from .direct_write import install as install_direct_writes
from .puback import install as install_puback_reader
from .receive import install as install_publish_decoder

__all__ = ["new_client"]


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
    install_publish_decoder(client)
    install_puback_reader(client)
    install_direct_writes(client)
    install_buffered_reads(client)
    return client
