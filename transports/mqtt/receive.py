"""The PUBLISH packets an ``mqtt://`` client receives, decoded by jmspy instead of paho.

Why: paho decodes a PUBLISH's MQTT 5 properties through its generic ``Properties`` class,
which looks every property up by name in lists rebuilt on each access. For the two
properties every jmspy message carries (content type and the ``jmspy-h`` user property)
that was over a third of a consumer's CPU (py-spy, GIL samples), and the reason a jmspy
consumer cost twice a raw paho one, whose test messages carry no properties at all.

What stays paho's: the socket, the network thread, the packet framing, PUBACK and QoS 2,
reconnects. Only turning one PUBLISH's bytes into a message and handing it to the
client's ``on_message`` is replaced, on one client *instance* (paho's ``_handle_publish``,
found through the instance first). The message is a :class:`ReceivedMessage`, with the
attributes of paho's ``MQTTMessage``, and it is handed on as paho's
``_handle_on_message`` does; a client with ``message_callback_add`` callbacks gets paho's
own message and dispatch. Its ``properties`` is a :class:`ReceivedProperties`, which
answers the attribute names paho's ``Properties`` uses for every property a PUBLISH may
carry.

Anything else -- QoS 2, a property a PUBLISH may not carry, a packet too short for what it
declares -- goes to paho's own method, which decides (and raises its MalformedPacket for
a broken packet). :func:`install` leaves paho's decoding in place if this paho has no such
step; ``tests/test_mqtt_receive.py`` compares the two decoders on generated packets and
fails if the fast path is not the one a client uses.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["ReceivedMessage", "ReceivedProperties", "decode_publish_properties", "install"]

_STEP = "_handle_publish"


class ReceivedProperties:
    """The MQTT 5 properties of a received PUBLISH, under paho's attribute names. Absent
    properties are absent attributes (``getattr(p, name, default)`` works as with paho);
    the multi-valued ones are lists, as paho makes them."""

    __slots__ = ("ContentType", "CorrelationData", "MessageExpiryInterval",
                 "PayloadFormatIndicator", "ResponseTopic", "SubscriptionIdentifier",
                 "TopicAlias", "UserProperty")

    ContentType: str
    CorrelationData: bytes
    MessageExpiryInterval: int
    PayloadFormatIndicator: int
    ResponseTopic: str
    SubscriptionIdentifier: list[int]
    TopicAlias: int
    UserProperty: list[tuple[str, str]]

    def __repr__(self) -> str:
        shown = {n: getattr(self, n) for n in self.__slots__ if hasattr(self, n)}
        return f"ReceivedProperties({shown})"


def _forbidden(text: str) -> bool:
    """MQTT strings may not hold U+0000 or U+FEFF ([MQTT-1.5.4-2/3]; the surrogates of
    [MQTT-1.5.4-1] never decode as UTF-8 in Python): paho refuses the packet for them."""
    return "\x00" in text or "\ufeff" in text


def _vbi(data: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """A Variable Byte Integer (at most 4 bytes) at ``data[pos]``, ending by ``end``: its
    value and the position after it, or None if it runs past ``end`` or is too long."""
    value = 0
    shift = 0
    while True:
        if pos >= end or shift > 21:
            return None
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def decode_publish_properties(
    data: bytes, pos: int
) -> tuple[ReceivedProperties, int] | None:
    """The properties starting at ``data[pos]`` (their variable-length size first) and
    where the payload starts; None if the bytes are not the properties of a valid
    PUBLISH (then paho's decoder gets the packet and says what is wrong)."""
    n = len(data)
    read = _vbi(data, pos, n)
    if read is None:
        return None
    size, pos = read
    end = pos + size
    if end > n:
        return None
    props = ReceivedProperties()
    user: list[tuple[str, str]] | None = None
    subs: list[int] | None = None
    try:
        while pos < end:
            ident = data[pos]
            pos += 1
            if ident == 0x26:  # User Property: a UTF-8 string pair; may repeat
                klen = (data[pos] << 8) | data[pos + 1]
                key = data[pos + 2:pos + 2 + klen].decode("utf-8")
                pos += 2 + klen
                vlen = (data[pos] << 8) | data[pos + 1]
                value = data[pos + 2:pos + 2 + vlen].decode("utf-8")
                pos += 2 + vlen
                if pos > end or _forbidden(key) or _forbidden(value):
                    return None
                if user is None:
                    user = props.UserProperty = []
                user.append((key, value))
            elif ident == 0x03 or ident == 0x08:  # Content Type, Response Topic
                if hasattr(props, "ContentType" if ident == 0x03 else "ResponseTopic"):
                    return None  # may appear once
                slen = (data[pos] << 8) | data[pos + 1]
                text = data[pos + 2:pos + 2 + slen].decode("utf-8")
                pos += 2 + slen
                if pos > end or _forbidden(text):
                    return None
                if ident == 0x03:
                    props.ContentType = text
                else:
                    props.ResponseTopic = text
            elif ident == 0x09:  # Correlation Data: binary
                if hasattr(props, "CorrelationData"):
                    return None
                blen = (data[pos] << 8) | data[pos + 1]
                props.CorrelationData = bytes(data[pos + 2:pos + 2 + blen])
                pos += 2 + blen
                if pos > end:
                    return None
            elif ident == 0x0B:  # Subscription Identifier: VBI; may repeat
                read = _vbi(data, pos, end)
                if read is None:
                    return None
                number, pos = read
                if subs is None:
                    subs = props.SubscriptionIdentifier = []
                subs.append(number)
            elif ident == 0x01:  # Payload Format Indicator: a byte
                if hasattr(props, "PayloadFormatIndicator") or pos + 1 > end:
                    return None
                props.PayloadFormatIndicator = data[pos]
                pos += 1
            elif ident == 0x02:  # Message Expiry Interval: four bytes
                if hasattr(props, "MessageExpiryInterval") or pos + 4 > end:
                    return None
                props.MessageExpiryInterval = int.from_bytes(data[pos:pos + 4], "big")
                pos += 4
            elif ident == 0x23:  # Topic Alias: two bytes
                if hasattr(props, "TopicAlias") or pos + 2 > end:
                    return None
                props.TopicAlias = (data[pos] << 8) | data[pos + 1]
                pos += 2
            else:
                return None  # not a PUBLISH property
    except (IndexError, UnicodeDecodeError):
        return None
    if pos != end:
        return None
    return props, end


class ReceivedMessage:
    """A received PUBLISH with the attributes of paho's ``MQTTMessage``, decoded once.

    paho's message decodes its topic from bytes on every read of ``topic`` (the transport
    reads it up to four times per message) and makes an ``MQTTMessageInfo``, with its own
    ``Condition``, that nothing ever waits on for a received message. Callgrind: making
    paho's message and passing it through ``_handle_on_message`` cost about 33k
    instructions per PUBLISH; this record and the direct call below a small part of it.
    """

    __slots__ = ("dup", "mid", "payload", "properties", "qos", "retain", "timestamp", "topic")

    def __init__(self, topic: str, mid: int, qos: int, dup: bool, retain: bool,
                 payload: bytes, properties: ReceivedProperties | None) -> None:
        self.topic = topic
        self.mid = mid
        self.qos = qos
        self.dup = dup
        self.retain = retain
        self.payload = payload
        self.properties = properties
        self.timestamp = time.monotonic()

    def __repr__(self) -> str:
        return (f"ReceivedMessage(topic={self.topic!r}, mid={self.mid}, qos={self.qos}, "
                f"dup={self.dup}, payload={len(self.payload)} bytes)")


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
