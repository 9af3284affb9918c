"""The streaming reader: at-least-once, the messages of micro-batch N acknowledged only
after Spark commits batch N.

Offsets are ``{"seq": S, "tick": T}``: ``S`` counts the messages this reader has taken
from its consumer (each gets the next sequence number when a batch reads it), so batch N
is the messages numbered ``(start.seq, end.seq]``. The messages wait in the reader, delivered and
unacknowledged, until ``commit(end)`` acknowledges each one numbered up to ``end.seq``
(``INDIVIDUAL_ACKNOWLEDGE``: only those). A query stopped or killed before its commit
closes the connection with them unacknowledged, and the broker delivers them again,
marked redelivered; a restarted query re-plans the uncommitted batch's range with
whatever the broker redelivers first.

The flush tick (SPARK.md): Spark commits batch N only when it plans batch N+1, which
needs a newer offset. When no new message comes but some are still unacknowledged, the
reader answers with the same ``seq`` and ``tick + 1``: an empty batch whose planning
commits the one before. That is what acknowledges the last batch before the queue goes
idle, and the last batch of ``trigger(availableNow=True)``.

The connection reconnects by default (:data:`~.options.READER_DEFAULTS`): a broker that
restarts mid-query drops what this reader had not acknowledged back into its queue, the
broker delivers it again (marked redelivered), and acknowledging the old copies at a
commit is a no-op (their tags belonged to the dropped connection).

Where it runs: Spark keeps one long-lived Python worker per query for the driver-side
calls (``latestOffset``, ``partitions``, ``commit``, ``stop``); the reader is pickled
there, so ``__init__`` holds only the options and the connection opens on first use. The
rows of a batch are made on that side and shipped in its partitions.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from jmspy.connection import Connection
from jmspy.consumer import MessageConsumer
from jmspy.errors import JMSException
from jmspy.message import Message
from jmspy.session import Session

from .data_loss import LossWatch
from .leased import LeasedBatches, LeasedPartition, read_share
from .options import READER_DEFAULTS, SourceOptions
from .receiving import Receivers
from .rows import fields_of, row_from

__all__ = ["StreamReader"]

#: How long ``latestOffset`` waits for the first message of a batch, and then between
#: messages, before it calls what it has the batch (seconds).
FIRST_WAIT = 0.2
NEXT_WAIT = 0.02
#: Rows per partition of a batch (partitions are read in parallel by the executors; a
#: 20,000-message batch in one would be one task on one core).
ROWS_PER_PARTITION = 10_000


class _Live:
    """The driver-side state: connection, consumer, and the messages taken.

    A message taken from the consumer waits in ``pending`` until a batch's
    :meth:`StreamReader.partitions` gives it its sequence number (``assign``), then in
    ``assigned`` until the commit that acknowledges it. Numbers are given only when a
    batch is read, never by ``latestOffset``: a restarted query may ask for the latest
    offset before it replays its uncommitted batch, and the messages the broker
    redelivers first must fill that batch, not the next."""

    def __init__(self, options: SourceOptions) -> None:
        factory = options.factory(**READER_DEFAULTS)  # reconnects unless told not to
        self.conn: Connection = factory.create_connection(options.user, options.password)
        try:
            session = self.session = self.conn.create_session(
                ack_mode=Session.INDIVIDUAL_ACKNOWLEDGE)
            if options.subscription_name:
                from jmspy.destinations import Topic

                self.consumers: list[MessageConsumer] = [session.create_durable_consumer(
                    Topic(options.name), options.subscription_name, options.selector)]
            else:
                self.consumers = [session.create_consumer(d, options.selector)
                                  for d in options.destinations]
            self.receivers = Receivers(self.consumers)
            self.losses = LossWatch(options.destinations, self.conn.destination_stats,
                                    options.fail_on_data_loss)
            self.conn.start()
        except BaseException:
            self.conn.close()
            raise
        self.pending: deque[Message] = deque()
        self.assigned: deque[tuple[int, Message]] = deque()
        #: the highest sequence number given (or skipped to, after a restart)
        self.last_seq = 0
        #: messages taken from the consumer so far
        self.taken = 0

    def take(self, n: int, first_wait: float) -> int:
        """Receive up to ``n`` more messages into ``pending``; returns how many came."""
        got = 0
        wait = first_wait
        while got < n:
            message = self.receivers.receive(wait)
            if message is None:
                break
            self.pending.append(message)
            got += 1
            wait = NEXT_WAIT
        self.taken += got
        return got

    def held(self) -> int:
        """Messages taken and not yet acknowledged (the broker counts them as delivering)."""
        return len(self.pending) + len(self.assigned)

    def ahead(self, seq: int) -> int:
        """Messages in hand that come after offset ``seq``."""
        return max(0, self.last_seq - seq) + len(self.pending)

    def assign(self, first: int, last: int) -> None:
        """Number pending messages up to ``last``, after ``first`` at the earliest."""
        self.last_seq = max(self.last_seq, first)
        while self.last_seq < last and self.pending:
            self.last_seq += 1
            self.assigned.append((self.last_seq, self.pending.popleft()))


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """See the module docstring."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._live: _Live | None = None
        self._available_now = False
        self._dry = False  # availableNow: the end is reached; take no more
        #: availableNow: stop once ``_Live.taken`` reaches this (None: when the consumer
        #: runs dry, the end for a topic or a broker that reports no queue depth)
        self._stop_at: int | None = None
        #: minMessagesPerTrigger: when the last batch was planned (maxTriggerDelay counts
        #: from there; the reader's start counts as one)
        self._clock = time.monotonic
        self._last_batch_at: float | None = None
        #: numPartitions: the executors read under reading leases (.leased) when the
        #: broker has them; decided once per process (None: not yet)
        self._leased: LeasedBatches | None = None
        self._leasing: bool | None = None
        self._lease_losses: LossWatch | None = None
        #: availableNow with leases: messages still to plan (None: no fixed end)
        self._now_left: int | None = None

    def _state(self) -> _Live:
        if self._live is None:
            self._live = _Live(self.options)
        return self._live

    def _leases(self) -> LeasedBatches | None:
        """The leased planner when the executors read (numPartitions on a broker with
        reading leases), else None: the driver reads."""
        if self._leasing is None:
            self._leasing = False
            if self.options.num_partitions is not None:
                self._leased = LeasedBatches(self.options)
                self._leasing = self._leased.supported()
        return self._leased if self._leasing else None

    # -- offsets ---------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        if self._leases() is not None:
            return LeasedBatches.initial()
        return {"seq": 0, "tick": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.min_per_trigger is not None:
            return ReadMinRows(self.options.min_per_trigger)
        n = self.options.max_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        """``trigger(availableNow=True)``: read what the queue holds now and stop there.
        Its depth (``messageCount``, which ``jmspy broker`` reports) less what this reader
        already holds is the number still to take; messages sent after this moment wait
        for the next run (Kafka's source fixes its end offsets the same way)."""
        self._available_now = True
        leased = self._leases()
        if leased is not None:  # the executors read: plan no more than is there now
            self._now_left = leased.available()
            self._dry = not self._now_left
            return
        live = self._state()
        depths = self._depths(live)
        if depths is None:
            return
        # what each queue held, less what this reader holds of it already: a message
        # sent later to one queue must not take the place of an older one of another
        held = [0] * len(depths)
        names = [str(d) for d in self.options.destinations]
        for message in (*live.pending, *(m for _, m in live.assigned)):
            where = str(message.destination)
            if where in names:
                held[names.index(where)] += 1
        left = [max(0, depth - h) for depth, h in zip(depths, held, strict=True)]
        live.receivers.limit(left)
        self._stop_at = live.taken + sum(left)
        if live.taken >= self._stop_at:
            self._dry = True

    def _depths(self, live: _Live) -> list[int] | None:
        """Each queue's message count now, or None (a topic among them, stats not
        reported)."""
        options = self.options
        if options.subscription_name or any(k != "queue" for k, _ in (
                (options.kind, options.name), *options.more)):
            return None
        depths = []
        for destination in options.destinations:
            try:
                count = live.conn.destination_stats(destination).get("messageCount")
            except JMSException:
                return None  # a broker without destination stats: end when it runs dry
            if not isinstance(count, int) or isinstance(count, bool):
                return None
            depths.append(count)
        return depths

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if "lease" in start:
            return self._latest_leased(start, limit)
        live = self._state()
        seq, tick = int(start.get("seq", 0)), int(start.get("tick", 0))
        lost = live.losses.offset_fields(start)
        if isinstance(limit, ReadMaxRows):
            room = limit.max_rows
        elif isinstance(limit, ReadMinRows) and self.options.max_per_trigger is not None:
            room = self.options.max_per_trigger
        else:
            room = 10**12
        ahead = live.ahead(seq)  # in hand already, not yet in a batch before ``seq``
        if ahead < room and not self._dry:
            want = min(room - ahead, 10**9)
            if self._stop_at is not None:
                want = min(want, self._stop_at - live.taken)
            got = live.take(want, FIRST_WAIT if not ahead else NEXT_WAIT) if want > 0 else 0
            if self._available_now and (not got or (
                    self._stop_at is not None and live.taken >= self._stop_at)):
                self._dry = True
            ahead = live.ahead(seq)
        if ahead and not self._short_of_minimum(ahead, limit):
            self._last_batch_at = self._clock()
            return {"seq": seq + min(room, ahead), "tick": tick, **lost}
        if live.assigned:  # nothing new, but unacknowledged ones: the flush tick
            return {"seq": seq, "tick": tick + 1, **lost}
        return {"seq": seq, "tick": tick, **lost}

    def _latest_leased(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """latestOffset when the executors read (.leased): plan from the queues' depth."""
        leased = self._leases()
        if leased is None:
            raise JMSException(
                f"jmspy data source: the checkpoint's offsets were made by executors reading "
                f"under reading leases, and {self.options.describe()} now has none (another "
                "broker, or numPartitions left out): use jmspy broker with numPartitions, "
                "or a new checkpoint location")
        if self._lease_losses is None:
            options = self.options
            self._lease_losses = LossWatch(options.destinations, leased.conn.destination_stats,
                                           options.fail_on_data_loss)
        lost = self._lease_losses.offset_fields(start)
        base = {k: start[k] for k in ("lease", "batch", "parts", "planned", "tick")}
        room = limit.max_rows if isinstance(limit, ReadMaxRows) else (
            self.options.max_per_trigger or 10**9)
        count = 0 if self._dry else min(room, leased.available())
        if self._now_left is not None:
            count = min(count, self._now_left)
            if not count:
                self._dry = True
        if count and not self._short_of_minimum(count, limit):
            self._last_batch_at = self._clock()
            if self._now_left is not None:
                self._now_left -= count
                self._dry = not self._now_left
            return {**leased.next_offset(base, count), **lost}
        if leased.unsettled(base):  # the flush tick: planning it commits the last batch
            return {**base, "tick": int(base["tick"]) + 1, **lost}
        return {**base, **lost}

    def _short_of_minimum(self, ahead: int, limit: ReadLimit) -> bool:
        """minMessagesPerTrigger: fewer than that are in hand and maxTriggerDelay has not
        passed since the last batch (or the reader's start), so no batch yet: the messages
        wait in hand for the next trigger. Never under availableNow, whose end is fixed."""
        if not isinstance(limit, ReadMinRows) or self._available_now:
            return False
        now = self._clock()
        if self._last_batch_at is None:
            self._last_batch_at = now
        if ahead >= limit.min_rows:
            return False
        return (now - self._last_batch_at) * 1000 < self.options.max_trigger_delay_ms

    def reportLatestOffset(self) -> dict[str, int] | None:
        live = self._live
        return None if live is None else {"seq": live.last_seq + len(live.pending), "tick": 0}

    # -- planning and reading --------------------------------------------------------------
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        if "lease" in end:
            leased = self._leases()
            assert leased is not None  # latestOffset refused the offsets otherwise
            return leased.partitions(start, end)
        first, last = int(start.get("seq", 0)), int(end.get("seq", 0))
        if last <= first:
            return []
        live = self._state()
        live.assign(first, last)
        if live.last_seq < last:  # a restarted query replays a range it never took
            live.take(last - live.last_seq, 5.0)
            live.assign(first, last)
        rows = [fields_of(m) for s, m in live.assigned if first < s <= last]
        return [InputPartition(rows[i:i + ROWS_PER_PARTITION])
                for i in range(0, len(rows), ROWS_PER_PARTITION)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if isinstance(partition, LeasedPartition):  # on an executor, over its connection
            yield from read_share(self.options, partition, self.options.lease_timeout_ms)
            return
        for fields in partition.value:  # the conversions run here, on the executors
            yield row_from(fields)

    # -- acknowledging ----------------------------------------------------------------------
    def commit(self, end: dict[str, Any]) -> None:
        """Spark committed everything up to ``end``: acknowledge those messages."""
        if "lease" in end:
            leased = self._leases()
            if leased is not None:
                leased.commit(end)
            return
        live = self._live
        if live is None:
            return
        last = int(end.get("seq", 0))
        assigned = live.assigned
        done = []
        while assigned and assigned[0][0] <= last:
            done.append(assigned.popleft()[1])
        if done:
            live.session.acknowledge_messages(done)  # one write for the batch's ACKs

    def stop(self) -> None:
        """The query stopped: close; what was not committed goes back to the broker."""
        live, self._live = self._live, None
        if live is not None:
            live.conn.close()
        if self._leased is not None:  # unsettled leases: replayed (released) or run out
            self._leased.stop()
