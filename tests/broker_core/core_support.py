"""Test doubles for driving the broker core directly: a recording callback, a fake clock
and a message factory. Imported by the tests in this folder (pytest puts it on sys.path)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from jmspy.broker_ref.core import BrokerError, Delivery, DestinationKind, ServerMessage

_ids = itertools.count(1)


class Recorder:
    """A SessionCallback that only records: it never calls back into the broker."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.closed: list[tuple[int, str]] = []
        #: outcomes of parked sends (producer flow control): (ticket, error or None)
        self.done: list[tuple[object, BrokerError | None]] = []

    def deliver(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)

    def consumer_closed(self, consumer_id: int, reason: str) -> None:
        self.closed.append((consumer_id, reason))

    def send_done(self, ticket: object, error: BrokerError | None) -> None:
        self.done.append((ticket, error))

    def take(self) -> list[Delivery]:
        out, self.deliveries = self.deliveries, []
        return out

    def bodies(self) -> list[Any]:
        return [d.message.body for d in self.take()]


class FakeClock:
    def __init__(self, start: int = 1_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def msg(
    destination: str,
    body: Any = None,
    *,
    kind: DestinationKind = DestinationKind.QUEUE,
    **kw: Any,
) -> ServerMessage:
    return ServerMessage(
        message_id=f"ID:test-{next(_ids)}", kind=kind, destination=destination, body=body, **kw
    )


def tmsg(destination: str, body: Any = None, **kw: Any) -> ServerMessage:
    return msg(destination, body, kind=DestinationKind.TOPIC, **kw)


def drain_acking(conn: Any, rec: Recorder) -> list[str]:
    """The bodies of every delivery ``rec`` holds, each batch acknowledged on ``conn``
    (what an acking consumer does), until a batch brings nothing new."""
    got: list[str] = []
    while batch := rec.take():
        got += [d.message.body for d in batch]
        conn.ack([d.delivery_tag for d in batch])
    return got


def rows_on_disk(path: Path) -> list[str]:
    """The message ids another process opening the SQLite file now would see, in order:
    what a crash right now would leave."""
    import sqlite3

    db = sqlite3.connect(str(path))
    try:
        return [r[0] for r in db.execute("SELECT id FROM messages ORDER BY seq")]
    finally:
        db.close()


class Disk:
    """A store (``kind`` "memory" or "sqlite", at ``path``), and how a broker restarted
    after a crash gets it back: the same instance in memory, the file opened again (the
    old connection left as a crash leaves it)."""

    def __init__(self, kind: str, path: Path) -> None:
        from jmspy.broker_ref.store.sqlite_store import SqliteStore
        from jmspy.broker_ref.store.store import MemoryStore

        self.kind, self.path = kind, path
        self.store: Any = MemoryStore() if kind == "memory" else SqliteStore(path)

    def reopen(self) -> Any:
        from jmspy.broker_ref.store.sqlite_store import SqliteStore

        if self.kind != "memory":
            self.store = SqliteStore(self.path)
        return self.store
