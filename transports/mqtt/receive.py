"""The PUBLISH packets an ``mqtt://`` client receives, decoded by jmspy instead of paho.

Why: paho decodes a PUBLISH's MQTT 5 properties through its generic ``Properties`` class,
which looks every property up by name in lists rebuilt on each access. For the two
properties every jmspy message carries (content type and the ``jmspy-h`` user property)
that was over a third of a consumer's CPU (py-spy, GIL samples), and the reason a jmspy
consumer cost twice a raw paho one, whose test messages carry no properties at all.

What stays paho's: the socket, the network thread, the packet framing, PUBACK and QoS 2,
reconnects. This module is the decoding itself, which reads only bytes: a
:class:`ReceivedMessage`, with the attributes of paho's ``MQTTMessage``, whose
``properties`` is a :class:`ReceivedProperties` answering the attribute names paho's
``Properties`` uses for every property a PUBLISH may carry. Putting it in place of paho's
step on a client instance is :mod:`.paho_private.publish_read`'s (paho's private names
stay in that adapter, used only on the paho releases the tests ran).
``tests/test_mqtt_receive.py`` compares the two decoders on generated packets.
"""

from __future__ import annotations

import time

__all__ = ["ReceivedMessage", "ReceivedProperties", "decode_publish_properties"]


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
