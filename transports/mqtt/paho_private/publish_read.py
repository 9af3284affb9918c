"""Received PUBLISH packets decoded by jmspy (:mod:`..receive`) in place of paho's own
``_handle_publish`` step, on one client *instance* (found through the instance first).

The message goes to the client's ``on_message`` as paho's ``_handle_on_message`` hands it
on; a client with ``message_callback_add`` callbacks gets paho's own message and dispatch.
Anything else -- QoS 2, a property a PUBLISH may not carry, a packet too short for what it
declares -- goes to paho's own method, which decides (and raises its MalformedPacket for a
broken packet). :func:`install` leaves paho's decoding in place if this paho has no such
step.
"""

from __future__ import annotations

import time
from typing import Any

from ..receive import ReceivedMessage, ReceivedProperties, decode_publish_properties

__all__ = ["install"]

_STEP = "_handle_publish"


def _fields(client: Any) -> tuple[int, bytes, int, ReceivedProperties | None, bytes] | None:
    """(header, topic bytes, packet id, properties, payload) of the client's current
    PUBLISH, or None for paho to decide."""
    packet = client._in_packet
    header: int = packet["command"]
    qos = (header & 0x06) >> 1
    if qos > 1:
        return None  # QoS 2's PUBREC/PUBREL dance stays paho's
    data: bytes = bytes(packet["packet"])
    n = len(data)
    if n < 2:
        return None
    tlen = (data[0] << 8) | data[1]
    pos = 2 + tlen
    if pos > n:
        return None
    topic = data[2:pos]
    mid = 0
    if qos:
        if pos + 2 > n:
            return None
        mid = (data[pos] << 8) | data[pos + 1]
        pos += 2
    properties: ReceivedProperties | None = None
    if client._protocol == 5:
        decoded = decode_publish_properties(data, pos)
        if decoded is None:
            return None
        properties, pos = decoded
    elif not topic:
        return None  # MQTT 3.1.1 forbids an empty topic: paho raises for it
    return header, topic, mid, properties, data[pos:]


def _paho_message(message_class: Any, fields: tuple[int, bytes, int, Any, bytes]) -> Any:
    """paho's ``MQTTMessage`` for decoded ``fields``, built as paho builds it."""
    header, topic, mid, properties, payload = fields
    message: Any = message_class(mid=mid, topic=topic)
    message.dup = bool(header & 0x08)
    message.qos = (header & 0x06) >> 1
    message.retain = bool(header & 0x01)
    message.properties = properties
    message.payload = payload
    message.timestamp = time.monotonic()
    return message


def _filtered(client: Any) -> bool:
    """True unless the client surely has no ``message_callback_add`` callbacks (jmspy
    registers none; with one, paho's own dispatch decides who gets the message)."""
    matcher = getattr(client, "_on_message_filtered", None)
    root = getattr(matcher, "_root", None)
    return root is None or bool(getattr(root, "_children", True))


def install(client: Any) -> bool:
    """Decode ``client``'s PUBLISH packets with :func:`decode_publish_properties`.
    ``client`` must be paho's with ``manual_ack=True`` (the jmspy transport's), so that
    acknowledging stays the transport's business. False, with paho's decoding left in
    place, if this paho has no such step.

    The message goes to the client's ``on_message`` as a :class:`ReceivedMessage`, called
    as paho's ``_handle_on_message`` calls it (under ``_in_callback_mutex``; an exception
    is logged and raised unless ``suppress_exceptions``). A client with filtered
    callbacks, or a topic that is not UTF-8, gets paho's ``MQTTMessage`` through paho's
    own dispatch instead."""
    original = getattr(type(client), _STEP, None)
    if not callable(original) or not callable(getattr(client, "_handle_on_message", None)):
        return False
    if not getattr(client, "_manual_ack", False) or not hasattr(client, "_in_packet"):
        return False
    if not hasattr(client, "_in_callback_mutex") or not hasattr(client, "_userdata"):
        return False
    from paho.mqtt.client import MQTT_LOG_ERR, MQTTMessage
    from paho.mqtt.enums import MQTTErrorCode

    success = MQTTErrorCode.MQTT_ERR_SUCCESS

    def handle_publish() -> Any:
        fields = _fields(client)
        if fields is None:
            return original(client)
        header, topic_bytes, mid, properties, payload = fields
        topic: str | None = None
        if not _filtered(client):
            try:
                topic = topic_bytes.decode("utf-8")
            except UnicodeDecodeError:
                pass
        if topic is None:
            client._handle_on_message(_paho_message(MQTTMessage, fields))
            return success
        message = ReceivedMessage(topic, mid, (header & 0x06) >> 1, bool(header & 0x08),
                                  bool(header & 0x01), payload, properties)
        on_message = client.on_message
        if on_message:
            with client._in_callback_mutex:
                try:
                    on_message(client, client._userdata, message)
                except Exception as err:
                    client._easy_log(MQTT_LOG_ERR, "Caught exception in on_message: %s", err)
                    if not client.suppress_exceptions:
                        raise
        return success

    setattr(client, _STEP, handle_publish)
    return True
