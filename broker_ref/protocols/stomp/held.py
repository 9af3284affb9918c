"""Producer flow control in a STOMP session: the SENDs and COMMITs the broker holds.

When the core parks a send or a commit (:mod:`...core.producer_flow`), the session
withholds that frame's RECEIPT until the core's ``send_done`` says it went through (or
failed). :class:`HeldSends` is the one place that counts what is held, and so decides
three things the session (:mod:`.protocol`) and its host act on:

* whether the frame just handled has its RECEIPT withheld;
* whether the host should stop reading the client (:attr:`HeldSends.reading_held`);
* when a DISCONNECT that arrived while sends were held may be answered: the client sent
  them before DISCONNECT, so they are not lost; it is answered once none is held.
"""

from __future__ import annotations

from jmspy.wire.headers import SEND_TIMEOUT_HEADER

from .mapping import header_int

__all__ = ["HELD_BYTES_READ_LIMIT", "HELD_FRAMES_READ_LIMIT", "HeldSend", "HeldSends",
           "send_timeout"]

#: Producer flow control: a client whose SENDs without a receipt pile up in the broker
#: past either bound has its socket no longer read until they go through (ActiveMQ stops
#: reading a producer that keeps sending when blocked). Clients that wait for receipts,
#: like jmspy's (a receipt every few hundred sends), stay under them and keep being read,
#: so their ACKs still arrive: a connection that consumes what it produces cannot
#: deadlock.
HELD_FRAMES_READ_LIMIT = 1000
HELD_BYTES_READ_LIMIT = 8 * 1024 * 1024


class HeldSend:
    """A SEND or COMMIT the broker parked (producer flow control): its receipt is
    withheld until ``StompSession.send_done``."""

    __slots__ = ("receipt", "size")

    def __init__(self, receipt: str | None, size: int) -> None:
        self.receipt = receipt
        self.size = size


def send_timeout(headers: dict[str, str]) -> int:
    """How long (ms) the frame may be held before it fails; 0: as long as it takes."""
    raw = headers.get(SEND_TIMEOUT_HEADER)
    return 0 if not raw else header_int(SEND_TIMEOUT_HEADER, raw, 0, 2**31 - 1)


class HeldSends:
    """What one session has held by producer flow control (see the module docstring)."""

    __slots__ = ("_bytes", "_count", "_disconnect_receipt", "_disconnecting", "_unreceipted",
                 "_withhold")

    def __init__(self) -> None:
        self._count = 0
        #: those without a receipt, and their bytes, decide :attr:`reading_held`
        self._unreceipted = 0
        self._bytes = 0
        #: a DISCONNECT that waits for the held sends before it is answered
        self._disconnecting = False
        self._disconnect_receipt: str | None = None
        #: set while the frame being handled has its RECEIPT withheld
        self._withhold = False

    @staticmethod
    def ticket(headers: dict[str, str], size: int) -> HeldSend:
        """A ticket for a frame the core may park; :meth:`parked` counts it if it does."""
        return HeldSend(headers.get("receipt"), size)

    def parked(self, ticket: HeldSend) -> None:
        """The core parked the frame of ``ticket``: its RECEIPT waits for :meth:`released`."""
        self._count += 1
        if ticket.receipt is None:
            self._unreceipted += 1
            self._bytes += ticket.size
        self._withhold = True

    def released(self, ticket: HeldSend) -> None:
        """The core is done with ``ticket`` (it went through, or failed)."""
        self._count -= 1
        if ticket.receipt is None:
            self._unreceipted -= 1
            self._bytes -= ticket.size

    @property
    def count(self) -> int:
        """SENDs and COMMITs held now."""
        return self._count

    @property
    def reading_held(self) -> bool:
        """SENDs without a receipt wait in the broker past :data:`HELD_FRAMES_READ_LIMIT`
        or :data:`HELD_BYTES_READ_LIMIT`: the host should stop reading the client."""
        return (self._unreceipted >= HELD_FRAMES_READ_LIMIT
                or self._bytes >= HELD_BYTES_READ_LIMIT)

    def take_withheld(self) -> bool:
        """Whether the frame just handled has its RECEIPT withheld (asked once per frame:
        the answer is reset for the next one)."""
        withheld, self._withhold = self._withhold, False
        return withheld

    def disconnect(self, receipt: str | None) -> None:
        """A DISCONNECT (its ``receipt``): while sends are held it waits for them, its
        RECEIPT withheld, and no later frame is read."""
        if self._count:
            self._disconnecting = True
            self._disconnect_receipt = receipt
            self._withhold = True

    @property
    def disconnecting(self) -> bool:
        """A DISCONNECT waits for the held sends."""
        return self._disconnecting

    def disconnect_due(self) -> bool:
        """The waiting DISCONNECT may be answered now: nothing is held any more."""
        return self._disconnecting and not self._count

    @property
    def disconnect_receipt(self) -> str | None:
        return self._disconnect_receipt
