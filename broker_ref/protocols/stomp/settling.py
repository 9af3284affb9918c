"""A STOMP session's ACK and NACK frames: which deliveries a frame names, settling them in
the core, and the windows they refill.

NACKs may come as one batch. A consumer that hands several messages back at once (a JMS
``session.recover()``) sends one NACK per message, and the broker puts each returned
message back at the head of its queue. Acted on one by one, the order comes out wrong
either way: oldest first, the later ones land in front of the earlier; newest first, the
window refilled by the first NACK redelivers it before the older ones are back. The jmspy
client therefore marks every NACK of such a batch but the last with
``jmspy-nack-more:true`` (:data:`~jmspy.wire.headers.NACK_MORE`): the broker holds those
and, on the last, hands the whole batch back in one core call (which restores the queue's
order) and then refills the windows once. Any other frame first ends a batch left open,
so nothing is held past the client's next frame, and a dropped connection returns held
messages as it returns every unacknowledged one.

A NACK may also say the client never gave the message to its application
(``jmspy-unseen:true``, :data:`~jmspy.wire.headers.NACK_UNSEEN`): it was only prefetched,
or arrived for a consumer already closing. The broker puts it back unmarked, its delivery
count not raised, as Open MQ's redeliver does for undelivered messages and as a ``vm://``
client's prefetched messages go back; otherwise every consumer that closes with a full
window would mark messages nobody has read as redelivered.
"""

from __future__ import annotations

from jmspy.stomp_frames import Frame
from jmspy.wire.headers import LEASE, LEASE_FROM, LEASE_TTL, NACK_MORE, NACK_UNSEEN

from ...core import ServerConnection
from .credit import SessionCredit
from .refusals import ProtocolError
from .subscription import Subscription
from .transactions import SessionTransactions

__all__ = ["SessionSettling"]


class SessionSettling:
    """ACK and NACK for one STOMP session."""

    __slots__ = ("_credit", "_held", "_subs", "_tag_owner", "_transactions")

    def __init__(self, subs: dict[str, Subscription], tag_owner: dict[int, Subscription],
                 credit: SessionCredit, transactions: SessionTransactions) -> None:
        """The session's indexes (subscriptions by id, unacked tag -> subscription), its
        credit and its transactions."""
        self._subs = subs
        self._tag_owner = tag_owner
        self._credit = credit
        self._transactions = transactions
        #: NACKed tags held for the rest of their batch, each with its subscription and
        #: whether the client says it never showed them to the application
        self._held: list[tuple[Subscription, list[int], bool]] = []

    @property
    def holding(self) -> bool:
        """A NACK batch is open (the session ends it before acting on another frame)."""
        return bool(self._held)

    def ack(self, frame: Frame, headers: dict[str, str], core: ServerConnection,
            version: str) -> None:
        sub, tag = self._find(frame, headers, version)
        token = headers.get(LEASE)
        if token is not None:
            self._lend(sub, tag, token, headers, core)
            return
        tags = self._take(sub, tag)
        tx = self._transactions.named(headers)
        if sub.broker_settles:  # at-most-once: already settled when it was sent
            self._credit.consumed(sub, len(tags))
            return
        core.ack(tags, tx)
        if tx is not None:
            self._transactions.acked(tx, sub, len(tags))
        else:
            self._credit.consumed(sub, len(tags))

    def _lend(self, sub: Subscription, tag: int, token: str, headers: dict[str, str],
              core: ServerConnection) -> None:
        """An ACK with ``jmspy-lease``: the delivery goes to a reading lease
        (core/leases.py), which the consumer's window counts as consumed."""
        if sub.broker_settles:
            raise ProtocolError("lease on an ack:auto subscription", "only a delivery that "
                                "waits for its ACK can be lent; subscribe with ack:client-"
                                "individual")
        if "transaction" in headers:
            raise ProtocolError("lease in a transaction", f"an ACK with {LEASE} cannot be "
                                "part of a transaction; send it without transaction:")
        ttl_text = headers.get(LEASE_TTL)
        ttl = None
        if ttl_text is not None:
            if not ttl_text.isdigit():
                raise ProtocolError(f"invalid {LEASE_TTL}", f"{LEASE_TTL} must be a whole "
                                    f"number of milliseconds, got {ttl_text!r}")
            ttl = int(ttl_text)
        first = headers.get(LEASE_FROM)
        if first is None:
            tags = self._take(sub, tag)
        elif not first.isdigit() or int(first) > tag:
            raise ProtocolError(f"invalid {LEASE_FROM}", f"{LEASE_FROM} must be the ack id "
                                f"of the first delivery to lend (at most the ACK's id {tag}), "
                                f"got {first!r}")
        else:
            tags = self._take_range(sub, int(first), tag)
        core.leases.lend(tags, token, ttl)
        self._credit.consumed(sub, len(tags))

    def nack(self, frame: Frame, headers: dict[str, str], core: ServerConnection,
             version: str) -> None:
        sub, tag = self._find(frame, headers, version)
        tags = self._take(sub, tag)
        if sub.broker_settles:  # at-most-once messages are gone: nothing to requeue
            self._credit.consumed(sub, len(tags))
        elif headers.get("requeue") == "false":  # RabbitMQ: dead-letter, not redeliver
            core.reject(tags, "rejected by the consumer (NACK with requeue:false)")
            self._credit.consumed(sub, len(tags))
        else:
            self._held.append((sub, tags, headers.get(NACK_UNSEEN) == "true"))
        if headers.get(NACK_MORE) != "true":
            self.end_batch(core)

    def end_batch(self, core: ServerConnection) -> None:
        """Hand back what the open NACK batch holds, in one call, then refill."""
        held, self._held = self._held, []
        if not held:
            return
        core.cancel([t for _, tags, _ in held for t in tags], redelivered=True,
                    unseen={t for _, tags, unseen in held if unseen for t in tags})
        credit = self._credit
        for sub, tags, _ in held:
            credit.consumed(sub, len(tags))

    def forget(self, sub: Subscription) -> None:
        """``sub``'s consumer was closed by the broker, which took back its deliveries:
        the batch no longer holds any of them."""
        self._held = [held for held in self._held if held[0] is not sub]

    def _find(self, frame: Frame, headers: dict[str, str],
              version: str) -> tuple[Subscription, int]:
        if version == "1.2":
            ack_id = headers.get("id")
            if ack_id is None or not ack_id.isdigit():
                raise ProtocolError("missing or invalid id header", f"{frame.command} in STOMP "
                                    "1.2 needs id: the value of the MESSAGE's ack header")
            tag = int(ack_id)
            owner = self._tag_owner.get(tag)
            if owner is not None:
                return owner, tag
            raise ProtocolError("unknown ack id", f"ack id {ack_id} names no unacknowledged "
                                "message on this connection (already acked, or auto mode?)")
        mid = headers.get("message-id")
        sid = headers.get("subscription")
        subs = [self._subs[sid]] if sid in self._subs else list(self._subs.values())
        for sub in subs:
            tag2 = sub.by_message_id.get(mid or "")
            if tag2 is not None:
                return sub, tag2
        raise ProtocolError("unknown message-id", f"message-id {mid!r} (subscription {sid!r})"
                            " names no unacknowledged message on this connection")

    def _take(self, sub: Subscription, tag: int) -> list[int]:
        return self._forget(sub.take(tag))

    def _take_range(self, sub: Subscription, first: int, last: int) -> list[int]:
        return self._forget(sub.take_range(first, last))

    def _forget(self, tags: list[int]) -> list[int]:
        owners = self._tag_owner
        for t in tags:
            del owners[t]
        return tags
