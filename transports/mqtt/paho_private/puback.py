"""The PUBACK packets an ``mqtt://`` producer receives, read by jmspy instead of paho.

Why: paho decodes every PUBACK into a fresh ``ReasonCode`` and a fresh ``Properties``,
and each of those copies paho's whole table of names when it is made. Callgrind, paho
2.2 on CPython 3.11: ``decode_puback`` of a two-byte PUBACK is about 129k instructions,
a third of everything a synchronous QoS 1 send costs the producer's process (about 370k,
paho's network loop included). A PUBACK almost always says only "this packet id, Success,
no properties".

What stays paho's: the socket, framing, the in-flight bookkeeping and the ``on_publish``
call (paho's ``_do_on_publish`` still does those), PUBCOMP (QoS 2), and every PUBACK that
carries properties or that paho would refuse. Only turning the common PUBACK's bytes into
(packet id, reason code, properties) is replaced, on one client *instance* (paho's
``_handle_pubackcomp``, found through the instance first), the way :mod:`.receive`
replaces the PUBLISH decoder:

* two bytes (packet id; the reason is Success), on MQTT 3.1.1 or 5;
* on MQTT 5, three bytes (packet id, reason code) or four whose property length is 0.

The reason code and the empty properties handed on are made once per client and per
reason value (through paho's own ``ReasonCode.unpack``, so a value paho does not know
for a PUBACK still goes to paho, which refuses it). They are shared between calls, which
is safe because the only ``on_publish`` of a jmspy client is the transport's, and it only
reads them. ``tests/test_mqtt_puback.py`` holds the fast path to paho's decoding, packet
for packet.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install", "installed"]

_STEP = "_handle_pubackcomp"
_MARK = "_jmspy_puback"


def installed(client: Any) -> bool:
    """True if ``client`` reads its PUBACK packets with this module's fast path."""
    return bool(getattr(client, _MARK, False))


def install(client: Any) -> bool:
    """Read ``client``'s plain PUBACK packets here (see the module). False, with paho's
    decoding left in place, if this paho has no such step."""
    original = getattr(type(client), _STEP, None)
    if (not callable(original) or not callable(getattr(client, "_do_on_publish", None))
            or not hasattr(client, "_in_packet") or not hasattr(client, "_out_messages")
            or not hasattr(client, "_out_message_mutex")):
        return False
    from paho.mqtt.client import MQTT_LOG_DEBUG
    from paho.mqtt.enums import MQTTErrorCode
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties
    from paho.mqtt.reasoncodes import ReasonCode

    success = MQTTErrorCode.MQTT_ERR_SUCCESS
    no_properties = Properties(PacketTypes.PUBACK)  # type: ignore[no-untyped-call]
    reasons: dict[int, Any] = {}

    def reason_for(value: int) -> Any:
        """paho's ReasonCode for a PUBACK reason ``value``, or None if paho refuses it."""
        reason = reasons.get(value)
        if reason is None:
            reason = ReasonCode(PacketTypes.PUBACK)
            try:
                reason.unpack(bytes((value,)))
            except (KeyError, ValueError):
                return None  # not a PUBACK reason: paho's decoder raises MalformedPacket
            reasons[value] = reason
        return reason

    def handle_pubackcomp(cmd: str) -> Any:
        packet = client._in_packet["packet"]
        n = len(packet)
        reason: Any = None
        if cmd == "PUBACK":
            if n == 2:
                reason = reason_for(0)
            elif client._protocol == 5 and (n == 3 or (n == 4 and packet[3] == 0)):
                reason = reason_for(packet[2])
        if reason is None:
            return original(client, cmd)
        mid = (packet[0] << 8) | packet[1]
        client._easy_log(MQTT_LOG_DEBUG, "Received %s (Mid: %d)", cmd, mid)
        with client._out_message_mutex:
            if mid in client._out_messages:
                return client._do_on_publish(mid, reason, no_properties)
        return success

    setattr(client, _STEP, handle_pubackcomp)
    setattr(client, _MARK, True)
    return True
