"""The two enumerations a broker message carries: what kind of destination it went to,
and what kind of body it has.

A module of their own, importing nothing, because both twins of the message record
(:mod:`.records` and ``cython_ext/records.pyx``) need them at import time for their
defaults, and :mod:`.api`, which re-exports them, in turn needs the records.
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
