"""MQTT topic names and filters <-> the broker core's topic names and patterns.

The core separates words with ``.`` and has the wildcards ``*`` (one word) and ``#``
(the rest, zero words included); MQTT separates with ``/`` and has ``+`` and ``#``. So an
MQTT publish to ``a/b`` is the core topic ``a.b``, which a JMS subscriber on topic
``a.b`` and a STOMP subscriber on ``/topic/a.b`` read, and ``a/+/#`` is ``a.*.#``. A
``.`` inside an MQTT level has no core equivalent and is refused, as is a core word
``*``/``>``/``#`` in a name an MQTT client would receive (it could not be subscribed to).
``$share/GROUP/FILTER`` is a shared subscription: the group is the core's shared
subscription name, so the group's members share its messages like a queue's consumers.
Other topics starting with ``$`` are served as Mosquitto serves them, ``$SYS`` aside
(the server's: not published to by clients): a filter that names the ``$`` level
matches them, one starting with a wildcard does not (MQTT-4.7.2-1, :func:`reaches`).
"""

from __future__ import annotations

from jmspy.errors import JMSException
from jmspy.wire.headers import BROKER_NAME, MQTT_VERSION_TOPIC

from ...core.errors import AccessDenied

__all__ = ["TopicError", "core_filter", "core_topic", "mqtt_topic", "reaches",
           "split_share", "suback_refusal"]

SHARE = "$share/"
SYS = "$SYS"


#: the one ``$SYS`` topic served: the broker's name and version, as Mosquitto publishes
#: it (a retained message to each subscriber), so a client can tell which broker it
#: reached (jmspy's ``messaging.system``); a subscription to it is answered, never stored
SYS_VERSION = MQTT_VERSION_TOPIC
SYS_VERSION_TEXT = BROKER_NAME


class TopicError(JMSException, ValueError):
    """A topic name or filter the broker cannot take; the text says why."""


def core_topic(topic: str) -> str:
    """The core topic an MQTT PUBLISH topic name names."""
    if not topic:
        raise TopicError("a PUBLISH needs a topic name (or a topic alias)")
    if "+" in topic or "#" in topic:
        raise TopicError(f"topic name {topic!r} has a wildcard; only filters may")
    if topic.split("/", 1)[0] == SYS:
        raise TopicError(f"topic {topic!r} is under $SYS, the server's: clients may not "
                         "publish there")
    return _words(topic)


def _words(text: str) -> str:
    levels = text.split("/")
    for level in levels:
        if "." in level or level in ("*", ">"):
            raise TopicError(f"{text!r}: level {level!r} has '.' or is '*'/'>', which the "
                             "broker's topic names use as separators and wildcards; use "
                             "'/' between levels and '+'/'#' as wildcards")
    # an empty level (a leading, trailing or double '/': "/TopicA") is a word of its
    # own, the empty one, as MQTT says (4.7.1.3); '+' matches it, as the core's '*' does
    return ".".join(levels)


def core_filter(topic_filter: str) -> str:
    """The core pattern of an MQTT topic filter (not a ``$share/`` one)."""
    if not topic_filter:
        raise TopicError("an empty topic filter")
    levels = topic_filter.split("/")
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != len(levels) - 1):
            raise TopicError(f"filter {topic_filter!r}: '#' must be a whole last level")
        if "+" in level and level != "+":
            raise TopicError(f"filter {topic_filter!r}: '+' must be a whole level")
    if levels[0] == SYS:
        raise TopicError(f"filter {topic_filter!r}: of $SYS only {SYS_VERSION} is served "
                         "(to subscribers)")
    return _words(topic_filter).replace("+", "*")


def reaches(topic_filter: str, core_name: str) -> bool:
    """Whether a message of core topic ``core_name`` goes to a subscription of MQTT
    ``topic_filter`` (not a ``$share/`` one) that the core matched: not when the topic
    starts with ``$`` and the filter with a wildcard (MQTT-4.7.2-1)."""
    return not (core_name[:1] == "$" and topic_filter[:1] in ("+", "#"))


def split_share(topic_filter: str) -> tuple[str | None, str]:
    """(group, filter) of a ``$share/GROUP/FILTER``; (None, filter) otherwise."""
    if not topic_filter.startswith(SHARE):
        return None, topic_filter
    parts = topic_filter.split("/", 2)
    if len(parts) < 3 or not parts[1] or "+" in parts[1] or "#" in parts[1] or not parts[2]:
        raise TopicError(f"shared subscription {topic_filter!r}: write $share/GROUP/FILTER")
    return parts[1], parts[2]


def mqtt_topic(core_name: str) -> str:
    """The MQTT topic name a delivery from core topic ``core_name`` carries."""
    return core_name.replace(".", "/")


def suback_refusal(exc: Exception, v5: bool) -> int:
    """The SUBACK code refusing a filter for ``exc``: a filter that maps to no core
    pattern (v5 0x8F, topic filter invalid), an ACL (0x87, not authorized), anything
    else the core refused (0x80); 3.1.1 has only 0x80."""
    if not v5:
        return 0x80
    if isinstance(exc, TopicError):
        return 0x8F
    return 0x87 if isinstance(exc, AccessDenied) else 0x80
