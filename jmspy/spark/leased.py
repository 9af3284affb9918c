"""Reading a micro-batch on the executors, under the broker's reading leases.

Why: the driver-side reader (:mod:`.stream`) takes every message over one connection in
the driver's Python worker, so a cluster adds nothing to how fast a query reads. With
``numPartitions`` on a broker that has reading leases (jmspy broker,
``broker_ref/core/leases.py``), the driver only plans: it reads the queues' depth, and
batch N becomes ``numPartitions`` tasks, each told to take its share of the messages
over its own connection on its executor. A task lends what it read to its partition's
token (``LEASE:N:P``, ``LEASE`` a random id made when the query first starts and kept in
its offsets, so the same after a restart from the checkpoint) and closes; the broker
keeps the messages, counted as in delivery. When Spark commits batch N the driver
settles its tokens, which consumes them.

What can go wrong, and why nothing is lost:

* a task dies (its executor killed): its connection drops and the broker takes back what
  it had not lent; the retried task first releases the token (what an earlier attempt
  lent came from rows that died with it), then reads again;
* the query stops or the driver dies before the commit: the leases are not settled;
  a restart replays batch N with the same tokens (each task releases, then reads: the
  released messages are at the head of the queue, marked redelivered), and otherwise
  each lease runs out after ``leaseTimeout`` (default 10 minutes) and its messages are
  redelivered, marked;
* the broker restarts: the leases are gone, and the broker's store gives the messages
  back as ready ones (redelivered, marked).

So reading is at least once, duplicates only marked, as with the driver-side reader.
The flush tick of :mod:`.stream` is here too: Spark commits batch N only when it plans
N+1, so while leases of the last batch are unsettled and nothing new comes, the driver
answers an offset with ``tick + 1`` (an empty batch whose planning commits the one
before).

Offsets: ``{"lease": ID, "batch": N, "parts": P, "planned": M, "tick": T}``: ``N`` counts
the batches planned, ``P`` is batch N's partition count, ``M`` the messages planned so
far.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from jmspy.connection import Connection
from jmspy.destinations import Destination, DestinationOptions
from jmspy.errors import UnsupportedFeatureException
from jmspy.factory import ConnectionFactory
from jmspy.message import Message
from jmspy.session import Session

from .options import READER_DEFAULTS, SourceOptions
from .receiving import Receivers
from .rows import row_of

__all__ = ["FIRST_WAIT", "NEXT_WAIT", "LeasedBatches", "LeasedPartition", "read_share"]

log = logging.getLogger("jmspy.client.spark")

#: The destination option that caps what a consumer is sent in all.
MAX_MESSAGES_OPTION = "consumer.maxMessages"

#: How long a task waits for the first message of its share, then between messages
#: (seconds): the planner saw these messages ready, so they come at once unless another
#: consumer of the queue took them first.
FIRST_WAIT = 2.0
NEXT_WAIT = 0.5


@dataclass(frozen=True)
class LeasedPartition(InputPartition):
    """One task's work: take up to ``share`` messages and lend them to ``token``."""

    token: str
    share: int


def _shares(total: int, parts: int) -> list[int]:
    """``total`` messages over ``parts`` tasks, as evenly as whole numbers go."""
    base, extra = divmod(total, parts)
    return [base + (1 if p < extra else 0) for p in range(parts)]


def _token(offset: Mapping[str, Any], partition: int) -> str:
    return f"{offset['lease']}:{offset['batch']}:{partition}"


class LeasedBatches:
    """The driver's side: depth, planning, settling (see the module docstring)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._conn: Connection | None = None
        #: the last batch whose tokens this process settled (-1: none yet)
        self._settled_through = -1

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            opts = self.options
            self._conn = opts.factory(**READER_DEFAULTS).create_connection(
                opts.user, opts.password)
        return self._conn

    def supported(self) -> bool:
        """The broker has reading leases (asked once, when the query first starts)."""
        try:
            self.conn.settle_leases([f"probe-{uuid.uuid4().hex}"])
        except UnsupportedFeatureException:
            log.warning("jmspy data source: numPartitions=%d asks for reading on the "
                        "executors, which needs jmspy broker's reading leases; %s has "
                        "none, so the driver reads (one connection)",
                        self.options.num_partitions or 0, self.options.describe())
            return False
        return True

    @staticmethod
    def initial() -> dict[str, Any]:
        return {"lease": uuid.uuid4().hex[:16], "batch": 0, "parts": 0, "planned": 0,
                "tick": 0}

    def available(self) -> int:
        """Messages ready in the query's queues now (not in delivery, not scheduled)."""
        total = 0
        for destination in self.options.destinations:
            stats = self.conn.destination_stats(destination)
            ready = (int(stats.get("messageCount") or 0) - int(stats.get("deliveringCount") or 0)
                     - int(stats.get("scheduledCount") or 0))
            total += max(0, ready)
        return total

    def next_offset(self, start: Mapping[str, Any], count: int) -> dict[str, Any]:
        """The offset of a new batch of ``count`` messages after ``start``."""
        parts = max(1, min(self.options.num_partitions or 1, count))
        return {**start, "batch": int(start["batch"]) + 1, "parts": parts,
                "planned": int(start["planned"]) + count, "tick": 0}

    def unsettled(self, start: Mapping[str, Any]) -> bool:
        """Batch ``start`` had tasks whose leases this process has not settled."""
        return int(start["parts"]) > 0 and int(start["batch"]) > self._settled_through

    def partitions(self, start: Mapping[str, Any], end: Mapping[str, Any]
                   ) -> list[LeasedPartition]:
        if int(end["batch"]) <= int(start["batch"]):
            return []  # a flush tick
        count = int(end["planned"]) - int(start["planned"])
        return [LeasedPartition(_token(end, p), share)
                for p, share in enumerate(_shares(count, int(end["parts"]))) if share]

    def commit(self, end: Mapping[str, Any]) -> None:
        """Spark committed batch ``end``: its messages are consumed."""
        batch = int(end["batch"])
        if batch <= self._settled_through or not int(end["parts"]):
            return
        settled = self.conn.settle_leases([_token(end, p) for p in range(int(end["parts"]))])
        log.debug("batch %d committed: %d messages settled", batch, settled)
        self._settled_through = batch

    def stop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def read_share(options: SourceOptions, partition: LeasedPartition, lease_ttl_ms: int
               ) -> Iterator[tuple[Any, ...]]:
    """On an executor: release what an earlier attempt lent to the token, take up to the
    share, lend it, close; then the rows."""
    window = max(1, min(partition.share, int(options.properties.get(
        "imqConsumerFlowLimit", partition.share))))
    # the window is the share, and each consumer is sent no more than the share in all
    # (consumer.maxMessages): none of the queue's next messages waits in a task's window
    # while it lends and closes, where another task of the batch could not have it
    factory = ConnectionFactory(options.url, **{
        **READER_DEFAULTS, **options.properties, "imqConsumerFlowLimit": window,
        "imqConsumerFlowThreshold": 0})
    taken: list[Message] = []
    with factory.create_connection(options.user, options.password) as conn:
        conn.release_leases([partition.token])
        session = conn.create_session(ack_mode=Session.INDIVIDUAL_ACKNOWLEDGE)
        consumers = [session.create_consumer(_at_most(d, partition.share), options.selector)
                     for d in options.destinations]
        receivers = Receivers(consumers)
        conn.start()
        wait = FIRST_WAIT
        while len(taken) < partition.share:
            message = receivers.receive(wait)
            if message is None:
                break
            taken.append(message)
            wait = NEXT_WAIT
        rows = [row_of(m) for m in taken]  # before lending: a bad message fails the task
        if taken:  # should this fail, the close returns them and the retry reads again
            session.lend_messages(taken, partition.token, lease_ttl_ms)
        for consumer in consumers:  # what it prefetched beyond them: back, not marked
            consumer.close()
    yield from rows


def _at_most(destination: Destination, share: int) -> Destination:
    """``destination`` with ``consumer.maxMessages`` at most ``share``."""
    items = dict(destination.options)
    given = items.get(MAX_MESSAGES_OPTION)
    items[MAX_MESSAGES_OPTION] = str(min(share, int(given)) if given else share)
    return type(destination)(destination.name, DestinationOptions(tuple(items.items())))
