"""Why an MQTT connection ended, in the words the broker gave.

An MQTT 5 broker that ends a connection sends DISCONNECT with a reason code and, often, a
Reason String (mosquitto: "Packet too large" with the limit it enforces); paho hands both
to ``on_disconnect``. The text of every call and event that the drop fails names them, not
the bare errno of the closed socket. MQTT 3.1.1 has no server DISCONNECT: a broker just
closes, and the reason is paho's ("Unspecified error") -- all that can be said.
"""

from __future__ import annotations

from typing import Any

__all__ = ["disconnect_reason"]


def disconnect_reason(reason: Any, props: Any) -> str:
    """``reason`` (paho's ReasonCode, or None) with its numeric code and the broker's
    Reason String when the DISCONNECT carried one, each said once."""
    if reason is None:
        text = "the connection closed"
    else:
        text = str(reason)
        value = getattr(reason, "value", None)
        if isinstance(value, int) and value:
            text = f"{text} (reason code {value})"
    said = getattr(props, "ReasonString", None) if props is not None else None
    if isinstance(said, str) and said.strip() and said.strip() not in text:
        text = f"{text}: {said.strip()}"
    return text
