"""Reading leases: deliveries a consumer hands over to a *token*, which any connection may
later settle (consume) or release (redeliver), and which run out by themselves.

Why: a Spark micro-batch reads its partitions on the executors, each task over its own
connection, but only the driver knows when the batch is committed, and by then the
tasks' connections are closed. An acknowledgement must come from the connection the
message was delivered on, and a closed connection returns everything it had not
acknowledged. A lease bridges the two: a task lends the messages it read to the token of
its partition (``QUERY:BATCH:PARTITION``), the deliveries leave its consumer (they no
longer come back when its connection closes) but stay in the queue, counted as being
delivered and kept in the store; the driver's commit settles the batch's tokens, which
consumes them; an aborted batch releases them, and a lease nobody settles runs out after
its time to live, both of which put the messages back at the head of their queue, marked
redelivered. A broker restart loses only leases, never messages: the store gives the
messages back as ready ones.

Only the deliveries a task really handed to Spark are lent: what the consumer had
prefetched beyond them returns to the queue with the connection's close, as always.
A retried task first releases what an earlier attempt lent to the same token (its rows
died with that attempt), so a commit never consumes a message no row came from.

Queues with an AMPS policy (seed 001) keep their own delivery leases, which these would
contradict: lending a delivery of such a queue is refused. No I/O here; the broker's
clock and timers drive the expiry (``Broker.process_timers``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, cast

from .api import DestinationKind
from .errors import IllegalBrokerState

if TYPE_CHECKING:
    from .consumer import DeliveryChannel, MessageRef
    from .queue_ops import QueueOps
    from .security import Action

__all__ = ["DEFAULT_LEASE_TTL_MS", "MAX_LEASE_TTL_MS", "ConnectionLeases", "ReadingLeases"]

#: A lease's time to live when the client names none: long enough for a micro-batch's
#: tasks to finish and its commit to come (ten minutes).
DEFAULT_LEASE_TTL_MS = 600_000
#: The longest time to live a client may ask for (a day): a lease holds messages away
#: from every other consumer, so one forgotten must still run out.
MAX_LEASE_TTL_MS = 86_400_000


class _Lease:
    __slots__ = ("expires_at", "refs")

    def __init__(self, expires_at: int) -> None:
        self.expires_at = expires_at
        #: lent deliveries, in the order they were lent
        self.refs: list[tuple[QueueOps, MessageRef]] = []


def check_ttl(ttl_ms: int | None) -> int:
    """A client's time to live for a lease (None: the default), or the error naming the
    range."""
    if ttl_ms is None:
        return DEFAULT_LEASE_TTL_MS
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not (
            1 <= ttl_ms <= MAX_LEASE_TTL_MS):
        raise IllegalBrokerState(
            f"a reading lease's time to live must be a whole number of milliseconds from 1 "
            f"to {MAX_LEASE_TTL_MS:,}, got {ttl_ms!r}")
    return ttl_ms


def check_token(token: str) -> str:
    if not isinstance(token, str) or not token or len(token) > 512 or "," in token:
        raise IllegalBrokerState(
            f"a reading lease's token must be a non-empty string of at most 512 characters "
            f"without commas, got {token!r}")
    return token


class ReadingLeases:
    """The broker's leases by token (see the module docstring). Not thread-safe: the
    broker's host serialises calls, as for the rest of the core."""

    __slots__ = ("_deadlines", "_leases")

    def __init__(self) -> None:
        self._leases: dict[str, _Lease] = {}
        #: (expires_at, token) for every lease; stale entries (settled, or renewed) are
        #: skipped when they come up
        self._deadlines: list[tuple[int, str]] = []

    def __len__(self) -> int:
        """How many messages are lent now."""
        return sum(len(lease.refs) for lease in self._leases.values())

    def tokens(self) -> list[str]:
        return list(self._leases)

    def held(self, token: str) -> int:
        """How many messages ``token`` holds."""
        lease = self._leases.get(token)
        return 0 if lease is None else len(lease.refs)

    def lend(self, token: str, queue: QueueOps, ref: MessageRef, now: int, ttl_ms: int
             ) -> None:
        """Hold ``ref`` (already taken off its consumer) under ``token`` until
        ``now + ttl_ms``; lending more to a token renews its time to live."""
        expires_at = now + ttl_ms
        lease = self._leases.get(token)
        if lease is None:
            lease = self._leases[token] = _Lease(expires_at)
            heapq.heappush(self._deadlines, (expires_at, token))
        elif expires_at > lease.expires_at:
            lease.expires_at = expires_at
            heapq.heappush(self._deadlines, (expires_at, token))
        lease.refs.append((queue, ref))

    def queues_of(self, tokens: Iterable[str]) -> set[str]:
        """The names of the queues whose messages ``tokens`` hold (for authorization)."""
        names: set[str] = set()
        for token in tokens:
            lease = self._leases.get(token)
            if lease is not None:
                names.update(q.name for q, _ in lease.refs)
        return names

    def _end(self, tokens: Iterable[str]) -> list[_Lease]:
        """The leases of ``tokens``, ended (unknown tokens: none)."""
        return [lease for token in tokens
                if (lease := self._leases.pop(token, None)) is not None]

    def settle(self, tokens: Iterable[str]) -> tuple[int, set[QueueOps]]:
        """Consume what ``tokens`` hold; returns how many, and the queues touched."""
        refs = [held for lease in self._end(tokens) for held in lease.refs]
        for queue, ref in refs:
            queue.deliveries.settle_lent(ref)
        return len(refs), {queue for queue, _ in refs}

    def release(self, tokens: Iterable[str]) -> tuple[int, set[QueueOps]]:
        """Put what ``tokens`` hold back on their queues' heads, marked redelivered, in
        their original order; returns how many, and the queues touched."""
        count = 0
        touched: set[QueueOps] = set()
        for lease in self._end(tokens):
            for queue, ref in reversed(lease.refs):  # each goes to the head: last first
                queue.deliveries.return_lent(ref)
                touched.add(queue)
            count += len(lease.refs)
        return count, touched

    def expire(self, now: int) -> set[QueueOps]:
        """Release every lease whose time to live has passed; the queues touched."""
        touched: set[QueueOps] = set()
        heap = self._deadlines
        while heap and heap[0][0] <= now:
            _, token = heapq.heappop(heap)
            lease = self._leases.get(token)
            if lease is not None and lease.expires_at <= now:
                touched |= self.release([token])[1]
        return touched

    def next_deadline(self) -> int | None:
        """When :meth:`expire` next has work (clock ms), or None."""
        heap = self._deadlines
        while heap:
            expires_at, token = heap[0]
            lease = self._leases.get(token)
            if lease is not None and lease.expires_at == expires_at:
                return expires_at
            heapq.heappop(heap)  # settled, released or renewed since
        return None


class ConnectionLeases:
    """One connection's door to the broker's leases: lending its own deliveries, and
    settling or releasing any token whose queues its user may consume from."""

    __slots__ = ("_authorize", "_channel", "_check", "_clock", "_leases", "_open", "_resume")

    def __init__(self, leases: ReadingLeases, channel: DeliveryChannel,
                 check_open: Callable[[], None], check: Callable[[list[int]], None],
                 authorize: Callable[[Action, DestinationKind, str], None],
                 clock: Callable[[], int], resume: Callable[[], None]) -> None:
        """``check_open`` refuses a closed connection, ``check`` tags it cannot settle
        now (unknown, twice, staged in a transaction); ``authorize`` is its security
        hook; ``resume`` lets parked producers go on once messages left the broker."""
        self._leases = leases
        self._channel = channel
        self._open = check_open
        self._check = check
        self._authorize = authorize
        self._clock = clock
        self._resume = resume

    def lend(self, delivery_tags: list[int], token: str, ttl_ms: int | None = None) -> None:
        """Hand these deliveries of this connection to ``token`` (see the module
        docstring); they leave their consumers as an acknowledgement would, and refill
        their windows the same way."""
        self._open()
        check_token(token)
        ttl = check_ttl(ttl_ms)
        self._check(delivery_tags)
        owners = self._channel.tags
        for tag in delivery_tags:
            if cast("QueueOps", owners[tag].queue).policy is not None:
                raise IllegalBrokerState(
                    f"queue {owners[tag].queue.name!r} has an AMPS policy, whose own "
                    "delivery leases decide redelivery; reading leases work on queues "
                    "without one (acknowledge its messages instead)")
        now = self._clock()
        touched: set[QueueOps] = set()
        for tag in delivery_tags:
            c = owners.pop(tag)
            queue = cast("QueueOps", c.queue)
            ref = queue.deliveries.lend(c, tag)
            self._leases.lend(token, queue, ref, now, ttl)
            touched.add(queue)
        for queue in touched:
            queue.dispatch()

    def settle(self, tokens: list[str]) -> int:
        """Consume what ``tokens`` hold (unknown or spent tokens hold nothing)."""
        self._authorize_tokens(tokens)
        count = self._dispatched(*self._leases.settle(tokens))
        if count:
            self._resume()  # messages left the broker: parked producers may go on
        return count

    def release(self, tokens: list[str]) -> int:
        """Give what ``tokens`` hold back to their queues, marked redelivered."""
        self._authorize_tokens(tokens)
        return self._dispatched(*self._leases.release(tokens))

    @staticmethod
    def _dispatched(count: int, touched: set[QueueOps]) -> int:
        """Dispatch the queues a settle or release touched; returns ``count``."""
        for queue in touched:
            if not queue.deleted:
                queue.dispatch()
        return count

    def _authorize_tokens(self, tokens: list[str]) -> None:
        self._open()
        for token in tokens:
            check_token(token)
        for name in sorted(self._leases.queues_of(tokens)):
            self._authorize("consume", DestinationKind.QUEUE, name)
