"""An MQTT PUBLISH <-> the core's :class:`ServerMessage` (the mapping docs/mqtt.md shows).

* QoS 0 is a non-persistent message, QoS 1 and 2 persistent ones; the QoS and the retain
  flag travel as the properties :data:`QOS_PROPERTY` and :data:`RETAIN_PROPERTY`, so an
  MQTT subscriber gets them back and a JMS consumer can read them.
* The payload is a BytesMessage body, or a TextMessage when the v5 payload format
  indicator says UTF-8; text and map bodies from JMS/STOMP go out as UTF-8 (maps as JSON).
* v5: user properties are message properties, the content type ``content-type``, the
  response topic the JMSReplyTo topic, correlation data the JMSCorrelationID, the message
  expiry interval the expiration (the remaining interval goes out again).
A message from JMS/STOMP has no QoS property: persistent ones go out at QoS 1,
non-persistent ones at QoS 0 (never above the subscription's).
"""

from __future__ import annotations

import json
from typing import Any

from ...core import BodyType, DestinationKind, ServerMessage
from . import topics

__all__ = ["QOS_PROPERTY", "RETAIN_PROPERTY", "from_publish", "to_publish"]

QOS_PROPERTY = "JMS_jmspy_MQTT_QoS"
RETAIN_PROPERTY = "JMS_jmspy_MQTT_Retain"
_CONTENT_TYPE = "content-type"


def from_publish(topic: str, payload: bytes, qos: int, retain: bool,
                 props: dict[str, Any], message_id: str, now: int) -> ServerMessage:
    """The core message of one PUBLISH (``topic`` already an MQTT topic name)."""
    properties: dict[str, Any] = {QOS_PROPERTY: qos}
    if retain:
        properties[RETAIN_PROPERTY] = True
    for key, value in props.get("user_property", ()):
        properties[key] = value
    if "content_type" in props:
        properties[_CONTENT_TYPE] = props["content_type"]
    body: str | bytes = payload
    body_type = BodyType.BYTES
    if props.get("payload_format_indicator") == 1:
        try:
            body, body_type = payload.decode("utf-8"), BodyType.TEXT
        except UnicodeDecodeError:
            pass
    expiry = props.get("message_expiry_interval")
    reply = props.get("response_topic")
    corr = props.get("correlation_data")
    return ServerMessage(
        message_id=message_id, kind=DestinationKind.TOPIC,
        destination=topics.core_topic(topic), body_type=body_type, body=body,
        properties=properties, persistent=qos > 0, timestamp=now,
        expiration=now + expiry * 1000 if expiry else 0,
        correlation_id=corr.decode("utf-8", "surrogateescape") if corr is not None else None,
        reply_to=(DestinationKind.TOPIC, topics.core_topic(reply)) if reply else None,
        size=len(payload) + len(topic) + 64)


def message_qos(msg: ServerMessage) -> int:
    qos = msg.properties.get(QOS_PROPERTY)
    if isinstance(qos, int) and not isinstance(qos, bool) and 0 <= qos <= 2:
        return qos
    return 1 if msg.persistent else 0


def payload_of(msg: ServerMessage) -> tuple[bytes, bool]:
    """(payload, is UTF-8 text)."""
    body = msg.body
    if isinstance(body, bytes):
        return body, False
    if isinstance(body, str):
        return body.encode("utf-8", "surrogateescape"), True
    if isinstance(body, dict):
        return json.dumps(body, default=str).encode(), True
    return b"", False


def to_publish(msg: ServerMessage, now: int, v5: bool) -> tuple[str, bytes, dict[str, Any]]:
    """(MQTT topic name, payload, v5 properties) of a delivery."""
    payload, text = payload_of(msg)
    topic = topics.mqtt_topic(msg.destination)
    if not v5:
        return topic, payload, {}
    props: dict[str, Any] = {}
    if text:
        props["payload_format_indicator"] = 1
    if msg.expiration:
        props["message_expiry_interval"] = max(1, (msg.expiration - now + 999) // 1000)
    ctype = msg.properties.get(_CONTENT_TYPE)
    if isinstance(ctype, str):
        props["content_type"] = ctype
    if msg.reply_to is not None and msg.reply_to[0] is DestinationKind.TOPIC:
        props["response_topic"] = topics.mqtt_topic(msg.reply_to[1])
    if msg.correlation_id is not None:
        props["correlation_data"] = msg.correlation_id.encode("utf-8", "surrogateescape")
    users = [(k, _text(v)) for k, v in msg.properties.items()
             if k not in (QOS_PROPERTY, RETAIN_PROPERTY, _CONTENT_TYPE) and v is not None]
    if users:
        props["user_property"] = users
    return topic, payload, props


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
