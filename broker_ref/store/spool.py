"""Where paged-out messages that the store does not keep go: a temporary spool file.

A queue pages out the backlog it cannot hold in RAM (seed 002, :mod:`.paging`).
Persistent messages on durable queues are in the store already; everything else --
non-persistent messages, temporary queues, non-durable subscriptions, brokers without a
store -- goes here. ActiveMQ calls this the temp store; like it, the spool promises
nothing across a restart: the file is created on first use, written without fsync and
deleted when the broker closes (or, after a crash, when the next one starts on the same
directory).

One SQLite file serves every queue of a broker: rows keyed by an increasing sequence
number, read back per ``(queue, level)`` in that order and deleted as they are taken.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

from ..core.api import ServerMessage
from .message_codec import CodecError, decode_message, encode_message

__all__ = ["Spool"]

log = logging.getLogger("jmspy.broker.store")


class Spool:
    """The temporary page file of one broker (see the module docstring).

    ``directory``: where the file goes (created if missing; a data directory's ``temp``);
    None puts it in a fresh directory under the system's temporary directory, removed on
    :meth:`close`.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._directory = None if directory is None else Path(directory)
        self._owned: Path | None = None
        self._db: sqlite3.Connection | None = None
        self.path: Path | None = None
        #: rows written, and rows that could not be read back (a damaged temp file)
        self.written = 0
        self.dropped = 0
        #: bytes of the messages the spool holds now (``temp-limit`` is compared with it;
        #: the file itself does not shrink when rows are deleted, SQLite reuses the pages)
        self.used = 0

    def _open(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        if self._directory is None:
            self._owned = directory = Path(tempfile.mkdtemp(prefix="jmspy-spool-"))
            # a broker never closed (a plain vm:// one) still removes it at exit
            weakref.finalize(self, shutil.rmtree, directory, True)
        else:
            directory = self._directory
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(directory, 0o700)  # paged-out messages are as private as stored ones
        self.path = directory / "spool.sqlite"
        for stale in (self.path, Path(f"{self.path}-journal")):
            stale.unlink(missing_ok=True)  # a crashed broker's spool: nothing to keep
        # created 0600 before SQLite opens it, whatever the umask (its journal follows)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        os.chmod(self.path, 0o600)
        db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=OFF")  # nothing here must survive a crash
        db.execute("PRAGMA synchronous=OFF")
        db.execute("CREATE TABLE spool (seq INTEGER PRIMARY KEY, queue TEXT NOT NULL, "
                   "level INTEGER NOT NULL, delivery_count INTEGER NOT NULL, data BLOB NOT NULL)")
        db.execute("CREATE INDEX spool_page ON spool (queue, level, seq)")
        self._db = db
        return db

    def put(self, queue: str, level: int, message: ServerMessage, delivery_count: int) -> None:
        """Write one message at the end of ``(queue, level)``."""
        data = encode_message(message)
        self._open().execute(
            "INSERT INTO spool (queue, level, delivery_count, data) VALUES (?, ?, ?, ?)",
            (queue, level, delivery_count, data))
        self.written += 1
        self.used += len(data)

    def _rows(self, queue: str, level: int, after: int,
              limit: int) -> list[tuple[int, int, bytes]]:
        if self._db is None:
            return []
        return self._db.execute(
            "SELECT seq, delivery_count, data FROM spool WHERE queue = ? AND level = ? "
            "AND seq > ? ORDER BY seq LIMIT ?", (queue, level, after, limit)).fetchall()

    def _decode(self, queue: str, data: bytes) -> ServerMessage | None:
        try:
            return decode_message(data)
        except CodecError as exc:
            self.dropped += 1
            log.warning("spool %s: dropped a message of %s: %s", self.path, queue, exc)
            return None

    def take(self, queue: str, level: int,
             limit: int) -> tuple[list[tuple[ServerMessage, int]], int]:
        """Remove and return the first ``limit`` messages of ``(queue, level)`` with their
        delivery counts; also how many rows left the file (unreadable ones included)."""
        rows = self._rows(queue, level, 0, limit)
        if not rows:
            return [], 0
        assert self._db is not None
        self._db.execute("DELETE FROM spool WHERE queue = ? AND level = ? AND seq <= ?",
                         (queue, level, rows[-1][0]))
        out = []
        for _seq, count, data in rows:
            self.used -= len(data)
            message = self._decode(queue, data)
            if message is not None:
                out.append((message, count))
        return out, len(rows)

    def scan(self, queue: str, level: int, after: int,
             limit: int) -> list[tuple[int, ServerMessage | None, int]]:
        """Read (not take) up to ``limit`` rows of ``(queue, level)`` after sequence
        number ``after``: ``(seq, message or None if unreadable, delivery_count)``."""
        return [(seq, self._decode(queue, data), count)
                for seq, count, data in self._rows(queue, level, after, limit)]

    def take_one(self, seq: int) -> None:
        """Remove the row ``seq`` (a selector consumer took it out of order)."""
        if self._db is not None:
            for (size,) in self._db.execute(
                    "DELETE FROM spool WHERE seq = ? RETURNING length(data)", (seq,)):
                self.used -= size

    def browse(self, queue: str, level: int) -> Iterator[ServerMessage]:
        """The messages of ``(queue, level)`` in order, left in the file."""
        after = 0
        while rows := self.scan(queue, level, after, 500):
            after = rows[-1][0]
            yield from (message for _, message, _ in rows if message is not None)

    def delete_queue(self, queue: str) -> None:
        if self._db is not None:
            (size,) = self._db.execute(
                "SELECT total(length(data)) FROM spool WHERE queue = ?", (queue,)).fetchone()
            self._db.execute("DELETE FROM spool WHERE queue = ?", (queue,))
            self.used -= int(size)

    def size_bytes(self) -> int:
        """Bytes the spool file takes on disk."""
        return self.path.stat().st_size if self.path is not None and self.path.exists() else 0

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        if self._owned is not None:
            shutil.rmtree(self._owned, ignore_errors=True)
            self._owned = None
