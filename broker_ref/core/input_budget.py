"""One broker-wide budget for the bytes of frames still being read (sans-I/O).

Each connection's parser holds the frame it is reading until the frame ends, up to the
frame limit (``max-frame-bytes``). Per connection that is bounded; across a thousand
connections, each streaming a large frame slowly, it is not: the connection cap times the
frame limit is far more than the memory a broker is given. So the protocol hosts report
how many bytes each connection holds in unfinished frames, and this budget tells them
whose reading to pause once the total is spent, and whom to read again once it is not.

Who pauses: only connections that hold part of a frame when the budget is spent. A client
whose reads end on frame boundaries (small SENDs, ACKs, heart-beats) holds nothing after a
read and is never paused, so the big-frame streams wait, not everybody. One holder, the
one holding the most when the budget was found spent (the *finisher*), keeps reading, so
that at least one frame always completes and gives its bytes back: pausing every holder
would leave all of them waiting for each other. Bytes held therefore stay below the
budget plus one frame, plus the single read each connection may bring in before it is
paused (a host cannot refuse bytes already read).

Who resumes: every paused connection, in the order paused, once the total is within the
budget again (a frame completed, a connection closed).

No I/O: the host calls :meth:`InputBudget.hold` after each read with what the connection
holds now, pauses the connection when told to, and resumes the ones :meth:`resumable`
returns.
"""

from __future__ import annotations

from collections.abc import Hashable

__all__ = ["DEFAULT_INPUT_BUDGET", "DEFAULT_MAX_FRAME_BYTES", "InputBudget"]

#: The broker's default ``max-frame-bytes``: 10 MiB. With the default ``max-connections``
#: of 1000 the frame limit alone would allow 10 GiB of frames being read, so the budget
#: below bounds the total; the frame limit bounds what one client can make the broker
#: hold for one frame (ActiveMQ's 100 MiB let ten clients streaming 200 MB frames take a
#: broker to a GiB). A client reading from other brokers accepts more (jmspy.stomp_frames).
DEFAULT_MAX_FRAME_BYTES = 10 * 1024 * 1024
#: The default budget: 64 MiB, the default ``memory-limit``: frames being read may take
#: as much RAM as the messages they become.
DEFAULT_INPUT_BUDGET = 64 * 1024 * 1024


class InputBudget:
    """Bytes of partly read frames across every connection, against ``limit`` (0: none)."""

    def __init__(self, limit: int = DEFAULT_INPUT_BUDGET) -> None:
        self.limit = 0
        self.set_limit(limit)
        #: bytes held now, over all connections
        self.used = 0
        #: times a connection's reading was paused by this budget (for stats)
        self.pauses = 0
        self._held: dict[Hashable, int] = {}
        self._paused: dict[Hashable, None] = {}  # insertion-ordered: resumed in order
        self._finisher: Hashable | None = None

    def set_limit(self, limit: int) -> None:
        if type(limit) is not int or limit < 0:
            raise ValueError(f"the input budget must be an int >= 0 (bytes, 0 = none), got "
                             f"{limit!r}")
        self.limit = limit

    @property
    def paused(self) -> int:
        """Connections whose reading this budget holds paused now."""
        return len(self._paused)

    def held_by(self, key: Hashable) -> int:
        return self._held.get(key, 0)

    def hold(self, key: Hashable, nbytes: int) -> bool:
        """``key`` now holds ``nbytes`` of frames not yet complete. True: pause its reading
        (the budget is spent and it is not the finisher); False: read on. A connection
        already paused stays paused until :meth:`resumable` returns it."""
        held = self._held
        before = held.get(key, 0)
        if nbytes:
            held[key] = nbytes
        elif before:
            del held[key]
        self.used += nbytes - before
        if not nbytes:
            if key == self._finisher:
                self._finisher = None
            return False
        if not self.limit or self.used <= self.limit:
            return False
        finisher = self._finisher
        if finisher is None or finisher not in held:
            finisher = self._finisher = max(held, key=held.__getitem__)
        if key == finisher:
            return False
        if key not in self._paused:
            self._paused[key] = None
            self.pauses += 1
        return True

    def forget(self, key: Hashable) -> None:
        """``key`` is gone (its connection closed): its bytes are given back."""
        self.used -= self._held.pop(key, 0)
        self._paused.pop(key, None)
        if key == self._finisher:
            self._finisher = None

    def resumable(self) -> list[Hashable]:
        """The paused connections to read again now (empty while the budget is spent):
        each is returned once and is no longer counted as paused."""
        if not self._paused or (self.limit and self.used > self.limit):
            return []
        keys = list(self._paused)
        self._paused.clear()
        return keys
