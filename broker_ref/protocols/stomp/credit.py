"""Who in a STOMP session gets message credit from the broker core, and when.

The session (:mod:`.protocol`) reports what happens (a subscription started, frames were
delivered or written, deliveries were consumed, the socket congested); this object alone
decides the credit the core gets for each subscription. Each subscription's own window is
its :class:`~.subscription.Subscription`'s business; what spans subscriptions is here:

* **Congestion.** While the host says its socket is congested (``pause``) no credit is
  granted; auto-mode credit is owed and paid on ``resume``, client modes recompute what
  they want. So a client that stops reading holds at most one window per subscription.
* **Auto mode** (``ack:auto``): the core settles on delivery, so the window is refilled by
  the frames the host has written (``written``), the only consumption the broker sees.
* **Byte windows** (Artemis's ``consumer-window-size``) are refilled one message at a time
  after a write or an acknowledgement, never from inside the core's delivery call.
* **The connection flow limit** (``jmspy-connection-flow-limit`` on CONNECT, Open MQ's
  ``imqConnectionFlowLimit``) caps what the client-acknowledged subscriptions of this
  connection hold together, unconsumed plus outstanding credit, by the same rule the jmspy
  client applies (:class:`jmspy.flow_cap.FlowCap`): a subscription cut short is fed first
  when capacity frees up. Auto-mode subscriptions are outside the cap: the broker cannot
  see their messages being consumed, only written.
"""

from __future__ import annotations

from collections.abc import Callable

from jmspy.flow_cap import FlowCap

from .subscription import AUTO, Subscription

__all__ = ["SessionCredit"]


class SessionCredit:
    """The session's one owner of credit decisions (see the module docstring)."""

    __slots__ = ("_cap", "_grant", "_paused", "_refill", "_subs")

    def __init__(self, grant: Callable[[int, int], None]) -> None:
        self._grant = grant  # (core consumer id, credits) -> the core
        self._paused = False
        self._cap: FlowCap[Subscription] | None = None
        #: open subscriptions (what the connection cap sums over, and resume revisits)
        self._subs: dict[Subscription, None] = {}
        #: subscriptions whose window refills once the host has written their frames
        self._refill: dict[Subscription, None] = {}

    def set_connection_limit(self, limit: int) -> None:
        """CONNECT asked for a connection-wide cap (0: none)."""
        self._cap = FlowCap(limit) if limit > 0 else None

    @property
    def connection_limit(self) -> int:
        return 0 if self._cap is None else self._cap.limit

    # -- what the session reports ----------------------------------------------------------

    def start(self, sub: Subscription) -> None:
        """``sub`` is attached to its core consumer: its first window."""
        self._subs[sub] = None
        if sub.ack_mode == AUTO:
            self._give_auto(sub, sub.initial_credit())
        else:
            sub.initial_credit()
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
            self._refill_window(sub, n)

    def consumed(self, sub: Subscription, n: int) -> None:
        """``n`` deliveries of ``sub`` were acknowledged, committed or nacked."""
        sub.consumed(n)
        self._top_up(sub)

    def closed(self, sub: Subscription) -> None:
        """``sub`` is gone (its unacknowledged deliveries went back to the core): what it
        held against the connection cap is free for the others."""
        self._subs.pop(sub, None)
        self._refill.pop(sub, None)
        if self._cap is not None:
            self._cap.forget(sub)
            self._top_up(None)

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
        self._grant(sub.consumer_id, n)

    def _top_up(self, sub: Subscription | None) -> None:
        """Client modes: grant what ``sub``'s window wants, within the connection cap
        (starved subscriptions first)."""
        if self._paused:
            return  # recomputed on resume
        cap = self._cap
        if cap is None:
            if sub is None:
                return
            n = sub.wanted()
            if n > 0:
                sub.granted(n)
                self._grant(sub.consumer_id, n)
            return
        held = sum(s.committed for s in self._subs)
        for share in cap.share(held, sub, Subscription.wanted):
            if share.granted > 0:
                share.key.granted(share.granted)
                self._grant(share.key.consumer_id, share.granted)
