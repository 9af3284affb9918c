"""Why a client's socket is not being read: each reason pauses and resumes on its own, and
the socket is read again only once none holds.

Four reasons stop reading a STOMP connection (:mod:`.connection`): back-pressure (the
transport's write buffer is above its high-water mark) or a password being checked off
the loop; producer flow control (the session holds too many of this client's sends
without receipts); the broker's input budget (other connections' unfinished frames
first); and fair turns (frames it sent wait in the session for a later loop turn). A
reason that ends must not resume a socket another reason still holds.
"""

from __future__ import annotations

import asyncio
import enum

__all__ = ["Pause", "ReadPauses"]


class Pause(enum.Enum):
    """One reason not to read a connection's socket."""

    #: the write buffer is above the high-water mark, or a login is being checked
    OUTPUT = "output"
    #: producer flow control: sends without receipts pile up in the broker
    PRODUCER_FLOW = "producer flow"
    #: the broker's input budget is spent
    INPUT_BUDGET = "input budget"
    #: frames read wait in the session for a later turn
    TURN = "turn"


class ReadPauses:
    """The reasons that hold a connection's reading, and the socket's pause and resume."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: set[Pause] = set()

    def paused(self, reason: Pause) -> bool:
        """Whether ``reason`` holds."""
        return reason in self._held

    @property
    def blocked(self) -> bool:
        """Not read for a reason other than fair turns (which act on its frames
        meanwhile): the client's silence then is ours, not the client's."""
        held = self._held
        return bool(held) and held != {Pause.TURN}

    def pause(self, reason: Pause, transport: asyncio.Transport | None) -> None:
        """``reason`` now holds; the socket stops being read if it is the first."""
        held = self._held
        if reason in held:
            return
        first = not held
        held.add(reason)
        if first and transport is not None:
            transport.pause_reading()

    def resume(self, reason: Pause, transport: asyncio.Transport | None) -> None:
        """``reason`` no longer holds; the socket is read again if it was the last."""
        held = self._held
        if reason not in held:
            return
        held.discard(reason)
        if not held and transport is not None:
            transport.resume_reading()
