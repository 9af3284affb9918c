"""Who in a STOMP session gets message credit from the broker core, and when.

The session (:mod:`.protocol`) reports what happens (a subscription started, frames were
delivered or written, deliveries were consumed, the socket congested); this object alone
decides the credit the core gets for each subscription. The credit granted and not yet
used is counted once, by the core (``ServerConnection.credit``): this object reads it
there and reports each grant to the core, keeping no second count of it. Each
subscription's own window (the rule, and the unconsumed deliveries only the protocol
sees) is its :class:`~.subscription.Subscription`'s business; what spans subscriptions is
here:

* **Congestion.** While the host says its socket is congested (``pause``) no credit is
  granted; auto-mode credit is owed and paid on ``resume``, client modes recompute what
  they want. So a client that stops reading holds at most one window per subscription.
* **Auto mode** (``ack:auto``): the core settles on delivery, so the window is refilled by
  the frames the host has written (``written``), the only consumption the broker sees.
* **Byte windows** (Artemis's ``consumer-window-size``) are refilled one message at a time
  after a write or an acknowledgement, never from inside the core's delivery call.
* **The connection flow limit** (``jmspy-connection-flow-limit`` on CONNECT, Open MQ's
  ``imqConnectionFlowLimit``) is the core's gate on the connection
  (:class:`~jmspy.broker_ref.core.flow_gate.ConnectionGate`): deliveries stop while the
  connection holds the limit unconsumed, whatever credit its subscriptions have, so credit
  given to a subscription with nothing to deliver holds nobody back. This object tells the
  gate what left the client: acknowledged, committed or nacked deliveries of the client
  modes, and, for auto mode (whose consumption the broker never sees), the frames once
  written, so auto subscriptions pass the gate without being held by it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .subscription import AUTO, Subscription

if TYPE_CHECKING:
    from ...core import ServerConnection

__all__ = ["SessionCredit"]


class SessionCredit:
    """The session's one owner of credit decisions (see the module docstring)."""

    __slots__ = ("_conn", "_limit", "_paused", "_refill", "_subs")

    def __init__(self) -> None:
        self._conn: ServerConnection | None = None  # the core connection, from CONNECT on
        self._paused = False
        self._limit = 0
        #: open subscriptions (what the connection cap sums over, and resume revisits)
        self._subs: dict[Subscription, None] = {}
        #: subscriptions whose window refills once the host has written their frames
        self._refill: dict[Subscription, None] = {}

    def attach(self, conn: ServerConnection, limit: int) -> None:
        """CONNECT made the core connection, with the connection-wide cap it asked for (0:
        none), which the core's gate of that connection enforces."""
        self._conn = conn
        self._limit = limit

    def detach(self) -> None:
        """The session is over: no more credit or releases reach the core."""
        self._conn = None

    def _grant(self, consumer_id: int, n: int) -> None:
        if self._conn is not None:
            self._conn.grant_credit(consumer_id, n)

    def _unused(self, sub: Subscription) -> int:
        """The core's unused credit for ``sub`` (the one count of it)."""
        conn = self._conn
        return 0 if conn is None else conn.credit(sub.consumer_id)

    def _release(self, n: int) -> None:
        """``n`` deliveries left the client: room at the connection's gate."""
        if self._conn is not None and not self._conn.closed:
            self._conn.release_flow(n)

    # -- what the session reports ----------------------------------------------------------

    def start(self, sub: Subscription) -> None:
        """``sub`` is attached to its core consumer: its first window."""
        self._subs[sub] = None
        if sub.ack_mode == AUTO:
            self._give_auto(sub, sub.initial_credit())
        else:
            self._top_up(sub)

    def delivered(self, sub: Subscription, n: int) -> None:
        """``n`` MESSAGE frames of ``sub`` were queued for the socket."""
        if sub.ack_mode == AUTO:
            sub.unwritten += n
            self._refill[sub] = None
        elif sub.byte_window is not None:
            self._refill[sub] = None

    def written(self) -> None:
        """The host handed the queued frames to the socket."""
        if not self._refill:
            return
        subs, self._refill = self._refill, {}
        for sub in subs:
            n, sub.unwritten = sub.unwritten, 0
            if n and self._limit:
                self._release(n)  # auto mode: written is all the consumption we see
            self._refill_window(sub, n)

    def consumed(self, sub: Subscription, n: int) -> None:
        """``n`` deliveries of ``sub`` were acknowledged, committed or nacked."""
        sub.consumed(n)
        if self._limit:
            self._release(n)
        self._top_up(sub)

    def closed(self, sub: Subscription, returned: int) -> None:
        """``sub`` is gone; ``returned`` of its deliveries went back to the core unacked.
        They, and auto-mode frames it will never see written, leave the connection."""
        self._subs.pop(sub, None)
        self._refill.pop(sub, None)
        left = returned + sub.unwritten
        sub.unwritten = 0
        if left and self._limit:
            self._release(left)

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False
        for sub in list(self._subs):
            n, sub.owed = sub.owed, 0
            self._refill_window(sub, n)

    # -- decisions ---------------------------------------------------------------------------

    def _refill_window(self, sub: Subscription, auto_credit: int) -> None:
        """Auto mode: give back ``auto_credit`` (what was written, or owed); client modes:
        what the window wants now (``unwritten`` and ``owed`` stay 0 for them)."""
        if sub.ack_mode == AUTO:
            self._give_auto(sub, auto_credit)
        else:
            self._top_up(sub)

    def _give_auto(self, sub: Subscription, n: int) -> None:
        if n <= 0 or sub.closed:
            return
        if self._paused:
            sub.owed += n
            return
        n = sub.capped(n)
        if n > 0:
            self._grant(sub.consumer_id, n)

    def _top_up(self, sub: Subscription) -> None:
        """Client modes: grant what ``sub``'s window wants (the connection's gate, not
        credit, holds the connection flow limit)."""
        if self._paused or self._conn is None:
            return  # recomputed on resume
        n = sub.capped(sub.wanted(self._unused(sub)))
        if n > 0:
            self._grant(sub.consumer_id, n)
