"""The QoS 1 and 2 PUBLISHes a session sent whose acknowledgement is not finished: their
packet ids, and what each one settles in the core.

QoS 1: PUBACK ends it. QoS 2 has two steps. PUBREC says the client has the message, so
the core's delivery is acknowledged then: were it given back at a disconnect, the core
would send it again as a new PUBLISH, which the client would take for a second message
(exactly once would be broken). PUBCOMP ends the exchange, and the consumer's window
refills (MQTT 5 counts a QoS 2 message against Receive Maximum until PUBCOMP).

The packet ids between PUBREC and PUBCOMP belong to the session, not to its connection
(:attr:`~.hub.StoredSession.outbound_pubrel`): a persistent session's client that comes
back is sent their PUBREL again, with the same ids (MQTT-4.4.0-1), and no new PUBLISH
takes one of those ids until its PUBCOMP came.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Container
from typing import NamedTuple

from ...core import ServerConnection
from .codec import MalformedPacket

__all__ = ["Outbound", "Settled", "Settlements"]


class Outbound:
    """One connection's unfinished QoS 1/2 PUBLISHes (see the module docstring)."""

    __slots__ = ("_entries", "_pids", "_released")

    def __init__(self) -> None:
        #: packet id -> [consumer id (0: none to refill), delivery tag (0: none to ack),
        #: qos, 1 when the connection's flow limit counts it (a core delivery)]
        self._entries: dict[int, list[int]] = {}
        self._pids = itertools.count(1)
        #: the session's packet ids waiting for PUBCOMP (PUBREC seen)
        self._released: set[int] = set()

    def adopt(self, released: set[int]) -> list[int]:
        """Take the session's waiting-for-PUBCOMP ids (kept across its connections);
        those to send PUBREL for again, in order."""
        self._released = released
        return sorted(released)

    def __len__(self) -> int:
        return len(self._entries)

    def next_pid(self) -> int:
        """A packet id no unfinished PUBLISH of this session has."""
        for _ in range(65536):
            pid = next(self._pids) % 65536
            if pid and pid not in self._entries and pid not in self._released:
                return pid
        raise MalformedPacket("no free packet id: 65535 messages in flight", 0x93)

    def sent(self, pid: int, qos: int, consumer_id: int, tag: int) -> None:
        """``pid`` went out at ``qos`` for ``consumer_id``'s delivery ``tag`` (0 and 0:
        a retained message, no core delivery)."""
        self._entries[pid] = [consumer_id, tag, qos, 1 if consumer_id else 0]

    def puback(self, pid: int) -> Settled | None:
        """A PUBACK: what it settles, None when ``pid`` is not an unacknowledged QoS 1
        PUBLISH (MQTT: ignored)."""
        entry = self._entries.get(pid)
        if entry is None or entry[2] != 1:
            return None
        del self._entries[pid]
        return Settled(entry[0], entry[1], bool(entry[3]))

    def pubrec(self, pid: int) -> int | None:
        """A PUBREC: the delivery tag to acknowledge in the core now (0: nothing, a
        PUBREC again), or None when ``pid`` is no QoS 2 PUBLISH of this session (the
        PUBREL answering it says 0x92, packet identifier not found)."""
        if pid in self._released:
            return 0
        entry = self._entries.get(pid)
        if entry is None or entry[2] != 2:
            return None
        tag, entry[1] = entry[1], 0
        self._released.add(pid)
        return tag

    def pubcomp(self, pid: int) -> Settled | None:
        """A PUBCOMP: what it settles (the tag is 0 unless PUBREC was skipped), None for
        an unknown ``pid``."""
        known = pid in self._released
        self._released.discard(pid)
        entry = self._entries.pop(pid, None)
        if entry is None:
            return _NOTHING if known else None  # an id of an earlier connection
        return Settled(entry[0], entry[1], bool(entry[3]))

    def consumer_closed(self, consumer_id: int) -> None:
        """Closing the consumer gave its unacknowledged deliveries back to the core:
        their acknowledgements ack nothing and refill no window now, but still free
        their place under the connection's flow limit."""
        for entry in self._entries.values():
            if entry[0] == consumer_id:
                entry[0] = entry[1] = 0


class Settled(NamedTuple):
    """What an acknowledgement settles: the delivery ``tag`` to ack in the core (0:
    none), the consumer whose window refills (0: none), and whether it frees a place
    under the connection's flow limit (``gated``)."""

    consumer_id: int
    tag: int
    gated: bool


_NOTHING = Settled(0, 0, False)


class Settlements:
    """The acknowledgements (PUBACK, PUBCOMP) of one read, settled in the core at once:
    one ack call, and one credit grant per subscription, so that the deliveries they
    free go out as one batch; settled one at a time, each PUBACK granted one credit and
    dispatched one message, a third of the host's time at QoS 1. The session applies
    them at the end of the read, and before it closes a consumer (whose unacknowledged
    deliveries the core would give back); its QoS 0 deliveries, once written."""

    __slots__ = ("refills", "tags")

    def __init__(self) -> None:
        self.tags: list[int] = []
        #: consumer ids whose places free up (0: a place under the flow limit only)
        self.refills: list[int] = []

    def add(self, settled: Settled | None) -> None:
        if settled is not None:
            if settled.tag:
                self.tags.append(settled.tag)
            if settled.gated:
                self.refills.append(settled.consumer_id)

    def delivered(self, consumer_id: int, tag: int) -> None:
        """A delivery that needs no acknowledgement from the client (QoS 0 written, or
        dropped unsent): ``tag`` acked (0: none, an auto-ack consumer), its place freed."""
        if tag:
            self.tags.append(tag)
        self.refills.append(consumer_id)

    def apply(self, conn: ServerConnection | None, live: Container[int]) -> None:
        """Settle what was added on ``conn`` (``live``: the consumers still open)."""
        tags, refills = self.tags, self.refills
        if not tags and not refills:
            return
        self.tags, self.refills = [], []
        if conn is None or conn.closed:
            return
        if tags:
            conn.ack(tags)
        if refills:  # the places under the flow limit (Receive Maximum), then the credit
            conn.release_flow(len(refills))
            for cid, n in Counter(refills).items():
                if cid in live:
                    conn.grant_credit(cid, n)
