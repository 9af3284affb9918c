"""The two enumerations a broker message carries: what kind of destination it went to,
and what kind of body it has.

They are the client's too, so they live in :mod:`jmspy.wire.kinds` (the bottom layer,
which imports nothing of jmspy); this module keeps the broker's name for them. It imports
nothing else, because both twins of the message record (:mod:`.records` and
``cython_ext/records.pyx``) need them at import time for their defaults, and :mod:`.api`,
which re-exports them, in turn needs the records.
"""

from __future__ import annotations

from jmspy.wire.kinds import BodyType, DestinationKind

__all__ = ["BodyType", "DestinationKind"]
