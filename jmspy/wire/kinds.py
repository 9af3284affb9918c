"""The two enumerations a message carries between the layers: what kind of destination
it went to, and what kind of body it has.

The broker core's message record defaults to them (both its twins, at import time) and
the in-process transport converts by them, so they import nothing but :mod:`enum`.
"""

from __future__ import annotations

import enum

__all__ = ["BodyType", "DestinationKind"]


class DestinationKind(enum.Enum):
    QUEUE = "queue"
    TOPIC = "topic"


class BodyType(enum.Enum):
    MESSAGE = "message"  # no body
    TEXT = "text"
    BYTES = "bytes"
    MAP = "map"
