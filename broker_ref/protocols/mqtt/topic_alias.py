"""MQTT 5 topic aliases, both ways (3.3.2.3.4).

Inbound: a client names a topic once with an alias, then sends the alias alone; the
broker allows :data:`TOPIC_ALIAS_MAXIMUM` of them (told in CONNACK).

Outbound: a client that allows aliases (Topic Alias Maximum in its CONNECT) gets them
from the broker too, so a device reading one topic over and over is not sent its name
every time. Aliases go to topics as they are sent; once all are taken, the one used
least lately is given to the new topic (sent with its name again). An alias counts as
known to the client only once a PUBLISH carrying it was really written: one dropped
before sending (too big for the client) teaches the client nothing.
"""

from __future__ import annotations

from collections import OrderedDict

from .codec import MalformedPacket

__all__ = ["TOPIC_ALIAS_MAXIMUM", "InboundAliases", "OutboundAliases"]

#: the aliases a client may set towards the broker; told in CONNACK
TOPIC_ALIAS_MAXIMUM = 16


class InboundAliases:
    """The aliases a client set in its PUBLISHes to the broker."""

    __slots__ = ("_topics",)

    def __init__(self) -> None:
        self._topics: dict[int, str] = {}

    def resolve(self, alias: int | None, topic: str) -> str:
        """The topic of a PUBLISH naming ``topic`` (may be empty) and ``alias``."""
        if alias is None:
            return topic
        if not 0 < alias <= TOPIC_ALIAS_MAXIMUM:
            raise MalformedPacket(f"topic alias {alias} is over the broker's topic alias "
                                  f"maximum {TOPIC_ALIAS_MAXIMUM}", 0x94)
        if topic:
            self._topics[alias] = topic
            return topic
        known = self._topics.get(alias)
        if known is None:
            raise MalformedPacket(f"topic alias {alias} was never set", 0x82)
        return known


class OutboundAliases:
    """The aliases the broker gave topics in PUBLISHes to one client (see above)."""

    __slots__ = ("_aliases", "maximum")

    def __init__(self, maximum: int = 0) -> None:
        self.maximum = maximum  #: the client's Topic Alias Maximum (0: no aliases)
        #: topic -> alias, least lately used first
        self._aliases: OrderedDict[str, int] = OrderedDict()

    def choose(self, topic: str) -> tuple[int, bool]:
        """The alias for ``topic`` (0: none) and whether the client knows it already
        (then the PUBLISH may leave the name out); nothing is taken till :meth:`used`."""
        alias = self._aliases.get(topic)
        if alias is not None:
            return alias, True
        if not self.maximum or not topic:
            return 0, False
        if len(self._aliases) < self.maximum:
            return len(self._aliases) + 1, False
        return next(iter(self._aliases.values())), False  # the least lately used one

    def used(self, topic: str, alias: int) -> None:
        """A PUBLISH with ``topic`` and ``alias`` (from :meth:`choose`) was written."""
        if topic in self._aliases:
            self._aliases.move_to_end(topic)
            return
        if len(self._aliases) >= self.maximum:
            self._aliases.popitem(last=False)
        self._aliases[topic] = alias
