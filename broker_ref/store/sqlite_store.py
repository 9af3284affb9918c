"""The crash-safe Store: SQLite (stdlib ``sqlite3``) in WAL mode, fsync'd at every commit.

What the broker promises over the wire -- a SEND or COMMIT that got its RECEIPT is on disk
-- is kept by *when* a commit happens, which is the host's choice:

* ``group_commit=False`` (embedded brokers, tests): each store call, or each ``batch()``
  (one broker operation: a transaction's commit, a multi-tag ack), is its own SQLite
  transaction, durable when the call returns.
* ``group_commit=True`` (the STOMP server): writes gather in one open transaction and the
  host calls :meth:`SqliteStore.commit` before it writes any reply frame. Everything the
  event loop did since the last commit -- many connections' SENDs and ACKs -- then costs
  one fsync, not one per message (ActiveMQ's and Artemis' journals batch the same way).
  A ``batch()`` is a SAVEPOINT inside it, so a broker operation that fails half-way
  leaves nothing of itself behind and takes no other connection's writes with it.

``synchronous=FULL`` makes each commit wait for the WAL to reach the disk; SQLite ignores a
torn last write when it opens the file again, so a ``kill -9`` (or power cut) at any
instant leaves the last committed state. Rows are read back with
:func:`~.message_codec.from_row` (layouts 1 and 2: :func:`~.message_codec.decode_message`);
a row that cannot be read is skipped, counted in :attr:`SqliteStore.dropped` with the
reason, and logged -- recovery keeps what is intact. A file damaged from outside is
salvaged (:mod:`.salvage`) when the store opens.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Collection
from pathlib import Path
from typing import Any, cast

from jmspy.errors import JMSException

from ..core.api import ServerMessage
from ..core.records import priority_level
from .message_codec import ROW_COLUMNS, CodecError, decode_message, from_row, to_row
from .page_rows import PACKED, narrow_paged
from .salvage import SalvageReport, salvage
from .store import (
    Paged,
    PageRun,
    RecoveredState,
    StoredMessage,
    SubscriptionRecord,
    paged_rows,
)
from .store_faults import StoreWriteFailed
from .store_writes import GroupWrites

__all__ = ["DamagedStoreError", "SqliteStore", "StoreError", "StoreWriteFailed"]

log = logging.getLogger("jmspy.broker.store")

#: The layout this jmspy writes (``PRAGMA user_version``). 1: the first (the message as
#: JSON in ``data``, no ``level``); 2: ``level`` and the ``messages_page`` index, read by
#: paging (seed 002); 3: one column per message field (``message_codec.ROW_COLUMNS``),
#: ``data`` empty -- rows of layouts 1 and 2 keep their JSON and are read as such. The
#: ``duplicate_ids`` table (.duplicates) came later in layout 3: an older jmspy that opens
#: the file ignores it, so it needs no new layout number; so does ``protocol_state`` (the
#: records protocol hosts keep: MQTT sessions and retained messages).
SCHEMA_VERSION = 3

_ROW_TYPES = {"kind": "TEXT", "dest": "TEXT", "body_type": "TEXT", "body": "", "props": "TEXT",
              "persistent": "INTEGER", "priority": "INTEGER", "ts": "INTEGER",
              "exp": "INTEGER", "at": "INTEGER", "corr": "TEXT", "reply_kind": "TEXT",
              "reply_name": "TEXT", "jms_type": "TEXT", "size": "INTEGER"}
_COLUMNS = ", ".join(ROW_COLUMNS)
_READ = f"seq, id, delivery_count, data, {_COLUMNS}"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    delivery_count INTEGER NOT NULL DEFAULT 0,
    data BLOB NOT NULL,
    level INTEGER NOT NULL DEFAULT 5,
    UNIQUE (queue, id)
);
CREATE TABLE IF NOT EXISTS duplicate_ids (
    address TEXT NOT NULL,
    id TEXT NOT NULL,
    n INTEGER NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (address, id)
);
CREATE INDEX IF NOT EXISTS duplicate_ids_order ON duplicate_ids (address, n);
CREATE TABLE IF NOT EXISTS protocol_state (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (kind, key)
);
CREATE TABLE IF NOT EXISTS subscriptions (
    queue TEXT PRIMARY KEY,
    client_id TEXT,
    name TEXT NOT NULL,
    topic TEXT NOT NULL,
    selector TEXT,
    no_local INTEGER NOT NULL,
    shared INTEGER NOT NULL
);
"""


#: The sequence number is the store's own (:attr:`SqliteStore._next_seq`), not SQLite's
#: AUTOINCREMENT: a transaction rolled back for having no net effect must not hand its
#: numbers out again (paging reads by sequence ranges it has already passed).
_INSERT = (
    f"INSERT INTO messages (seq, queue, id, delivery_count, data, level, {_COLUMNS}) VALUES "
    f"(?, ?, ?, 0, x'', ?, {', '.join('?' * len(ROW_COLUMNS))}) ON CONFLICT (queue, id) DO "
    "UPDATE SET delivery_count = 0, data = x'', level = excluded.level, "
    + ", ".join(f"{c} = excluded.{c}" for c in ROW_COLUMNS) + " RETURNING seq")


_WHERE = "WHERE queue = ? AND level = ? AND seq BETWEEN ? AND ? ORDER BY seq LIMIT ?"
#: dense: the range is mostly this queue's rows, so walking the table in rowid order beats
#: going through the index (a lookup per row); sparse, the index skips the other queues'
#: rows. The ``+`` keeps SQLite from choosing the index.
_WHERE_DENSE = ("WHERE +queue = ? AND +level = ? AND seq BETWEEN ? AND ? ORDER BY seq "
                "LIMIT ?")
_PAGE = f"SELECT {_READ} FROM messages {_WHERE}"
_PAGE_DENSE = f"SELECT {_READ} FROM messages {_WHERE_DENSE}"
#: The drain's read (:meth:`SqliteStore.take_page`): eight values a row, not nineteen
#: (the last packs the small fields, or is NULL for a row this read cannot carry), turned
#: into messages by :func:`~.page_rows.narrow_paged`, whose module says why.
_NARROW = f"seq, id, dest, body, props, ts, size, {PACKED}"
_TAKE = (f"SELECT {_NARROW} FROM messages {_WHERE}",
         f"SELECT {_NARROW} FROM messages {_WHERE_DENSE}")
#: The full read with the packed value first: a queue whose rows are mostly ones the
#: narrow read cannot carry reads them whole at once, and goes back when they are not.
_TAKE_WIDE = (f"SELECT {PACKED}, {_READ} FROM messages {_WHERE}",
              f"SELECT {PACKED}, {_READ} FROM messages {_WHERE_DENSE}")
#: Rows a narrow read could not carry, read whole by sequence number, this many a query
#: (SQLite before 3.32 allows 999 parameters).
_BY_SEQ_CHUNK = 500


def _empty_file(path: Path) -> bool:
    """``path`` exists with no byte in it, and no write-ahead log holds its pages."""
    try:
        if path.stat().st_size:
            return False
    except OSError:
        return False
    try:
        return Path(f"{path}-wal").stat().st_size == 0
    except OSError:
        return True


class StoreError(JMSException):
    """The store cannot be used (named path, what is wrong, what to do)."""


class DamagedStoreError(StoreError):
    """The store file is damaged and was not salvaged (``salvage_damaged=False``)."""


class SqliteStore(GroupWrites):
    """A :class:`~.store.Store` in one SQLite file (see the module docstring)."""

    def __init__(self, path: str | Path, *, group_commit: bool = False,
                 salvage_damaged: bool = True, mode: int = 0o600, reserve: int = 0) -> None:
        self.path = Path(path)
        #: the permission bits of the store's files (the ``-wal``/``-shm`` SQLite makes
        #: take the main file's), whatever the umask
        self.mode = mode
        #: (queue, message id, why) of every row a load() could not read
        self.dropped: list[tuple[str, str, str]] = []
        GroupWrites.__init__(self, self.path, group_commit, reserve)
        #: queues whose last page-in was mostly rows the narrow read cannot carry
        self._wide: set[str] = set()
        #: what salvage() kept of a damaged file this store replaced (None: not damaged)
        self.salvaged: SalvageReport | None = None
        #: the file was there but empty (0 bytes, no log): SQLite reads that as a new
        #: store, but a broker never leaves one so once it has opened it -- a store that
        #: held messages was cut to nothing (a bad copy, a disk that filled mid-copy)
        self.was_empty = _empty_file(self.path)
        if self.was_empty:
            log.warning("message store %s: the file is empty (0 bytes): starting with no "
                        "messages; if this broker stored messages before, the file was cut "
                        "to nothing and they are lost", self.path)
        try:
            try:
                self._open_with_room()
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, sqlite3.OperationalError) or not self.path.exists():
                    raise
                self._db.close()
                if not salvage_damaged:
                    raise DamagedStoreError(
                        f"the message store {self.path} is damaged: {exc}") from exc
                self.salvaged = salvage(self.path, str(exc), lambda fresh: SqliteStore(
                    fresh, group_commit=True, salvage_damaged=False, mode=mode))
                self._open()
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot open the message store {self.path}: {exc}. Check that the data "
                "directory is a writable directory on a local disk with free space (a "
                "damaged file is moved aside by a broker starting on it, which keeps what "
                "it can still read)") from exc

    def _open_with_room(self) -> None:
        """Open; on a disk too full to open the store, once more after giving the space
        reserve back (:meth:`open_on_a_full_disk`)."""
        try:
            self._open()
        except sqlite3.OperationalError as exc:
            with contextlib.suppress(sqlite3.Error, AttributeError):
                self._db.close()
            if not self.open_on_a_full_disk(exc):
                raise
            self._open()

    def _open(self) -> None:
        """Open, upgrade, and read where the rows are (which also proves the index is
        readable: a damaged file fails here, and is salvaged, rather than mid-dispatch)."""
        self._own_files()
        reserve = self.hold_reserve()
        self._db = sqlite3.connect(str(self.path), isolation_level=None,
                                   check_same_thread=False)
        problems = [row[0] for row in self._db.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:  # damaged where the index does not look (table pages)
            raise sqlite3.DatabaseError(
                "integrity check failed: " + "; ".join(str(p) for p in problems))
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        if reserve:  # the log never outgrows what the reserve can checkpoint
            (page,) = self._db.execute("PRAGMA page_size").fetchone()
            pages = max(100, min(1000, reserve // int(page) // 2))
            self._db.execute(f"PRAGMA wal_autocheckpoint = {pages}")
        self._migrate()
        # past every number handed out: the rows', and AUTOINCREMENT's of older stores
        (last,) = self._db.execute(
            "SELECT max(coalesce((SELECT max(seq) FROM messages), 0), coalesce((SELECT seq "
            "FROM sqlite_sequence WHERE name = 'messages'), 0))").fetchone()
        self._next_seq = int(last) + 1
        self._state: RecoveredState | None = self._read_state()

    def _own_files(self) -> None:
        """Create the store file with :attr:`mode` (before SQLite does, with the umask's)
        and give it and its existing ``-wal``/``-shm`` that mode: messages are private."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, self.mode)
        except OSError:
            return  # sqlite3.connect names the problem
        try:
            os.fchmod(fd, self.mode)
        finally:
            os.close(fd)
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.chmod(f"{self.path}{suffix}", self.mode)

    def _migrate(self) -> None:
        """Bring a store written by an older jmspy to this layout (a newer one is refused:
        this version cannot know what it means)."""
        db = self._db
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the message store {self.path} was written by a newer jmspy (layout "
                f"{version}, this one reads up to {SCHEMA_VERSION}): upgrade jmspy, or "
                "point --data-dir elsewhere")
        columns = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
        db.execute("BEGIN IMMEDIATE")
        try:
            if columns and "level" not in columns:  # layout 1: the level is in the data
                db.execute("ALTER TABLE messages ADD COLUMN level INTEGER NOT NULL DEFAULT 5")
                rows = db.execute("SELECT seq, data FROM messages").fetchall()
                for seq, data in rows:
                    try:
                        level = priority_level(decode_message(data).priority)
                    except CodecError:
                        continue  # load() reports it when it reads the row
                    db.execute("UPDATE messages SET level = ? WHERE seq = ?", (level, seq))
                log.info("message store %s: upgraded %d rows to layout %d",
                         self.path, len(rows), SCHEMA_VERSION)
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            columns = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
            for name in ROW_COLUMNS:
                if name not in columns:
                    db.execute(f"ALTER TABLE messages ADD COLUMN {name} {_ROW_TYPES[name]}")
            db.execute("CREATE INDEX IF NOT EXISTS messages_page "
                       "ON messages (queue, level, seq)")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- the Store interface ----------------------------------------------------------------

    def add_message(self, queue: str, message: ServerMessage, deferrable: bool = False) -> int:
        # RETURNING: the same id again keeps its row (and sequence number), which
        # lastrowid would not tell
        seq = self._next_seq
        self._next_seq = seq + 1
        key = (queue, message.message_id)
        params = (seq, queue, message.message_id, priority_level(message.priority),
                  *to_row(message))
        if deferrable and self._defer_add(_INSERT, params, key):
            self._state = None
            return seq
        row = self._write(_INSERT, params, fetch=True, add=key)
        return 0 if row is None else int(row[0])  # None: committed alone, on a redo

    def _reading(self) -> sqlite3.Connection:
        """The connection, for a read: the adds kept for the commit are made first, so
        that every read sees every message stored."""
        self._make_deferred()
        return self._db

    def _new_row(self, params: tuple[object, ...], row: Any) -> bool:
        """An add made a new row when it kept the sequence number it was given (an
        existing row of the same message keeps its own)."""
        return row is not None and row[0] == params[0]

    def _write(self, sql: str, params: tuple[object, ...], fetch: bool = False,
               add: tuple[str, str] | None = None, own: tuple[str, str] | None = None,
               drops: bool = False) -> Any:
        self._state = None  # what open() read is out of date
        return GroupWrites._write(self, sql, params, fetch, add, own, drops)

    def remove_message(self, queue: str, message_id: str) -> None:
        self.forget_unstored(queue, message_id)
        self._write("DELETE FROM messages WHERE queue = ? AND id = ?", (queue, message_id),
                    own=(queue, message_id), drops=True)

    def update_delivery_count(self, queue: str, message_id: str, count: int) -> None:
        self._write("UPDATE messages SET delivery_count = ? WHERE queue = ? AND id = ?",
                    (count, queue, message_id), own=(queue, message_id))

    def delete_queue(self, queue: str) -> None:
        self._write("DELETE FROM messages WHERE queue = ?", (queue,))

    def add_subscription(self, record: SubscriptionRecord) -> None:
        self._write(
            "INSERT OR REPLACE INTO subscriptions (queue, client_id, name, topic, selector, "
            "no_local, shared) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (record.queue, record.client_id, record.name, record.topic, record.selector,
             int(record.no_local), int(record.shared)))

    def remove_subscription(self, queue: str) -> None:
        self._write("DELETE FROM subscriptions WHERE queue = ?", (queue,))

    def add_duplicate_id(self, address: str, dup_id: str, n: int, at_ms: int) -> None:
        self._write("INSERT OR REPLACE INTO duplicate_ids (address, id, n, at) "
                    "VALUES (?, ?, ?, ?)", (address, dup_id, n, at_ms))

    def trim_duplicate_ids(self, address: str, oldest_kept: str) -> None:
        self._write("DELETE FROM duplicate_ids WHERE address = ? AND n < (SELECT n FROM "
                    "duplicate_ids WHERE address = ? AND id = ?)",
                    (address, address, oldest_kept))

    def load_duplicate_ids(self) -> dict[str, list[tuple[str, int, int]]]:
        out: dict[str, list[tuple[str, int, int]]] = {}
        for address, dup_id, n, at in self._reading().execute(
                "SELECT address, id, n, at FROM duplicate_ids ORDER BY address, n"):
            out.setdefault(address, []).append((dup_id, int(n), int(at)))
        return out

    def put_state(self, kind: str, key: str, data: bytes) -> None:
        self._write("INSERT OR REPLACE INTO protocol_state (kind, key, data) VALUES (?, ?, ?)",
                    (kind, key, data))

    def remove_state(self, kind: str, key: str) -> None:
        self._write("DELETE FROM protocol_state WHERE kind = ? AND key = ?", (kind, key))

    def load_state(self, kind: str) -> dict[str, bytes]:
        return {str(key): bytes(data) for key, data in self._reading().execute(
            "SELECT key, data FROM protocol_state WHERE kind = ?", (kind,))}

    def load(self) -> RecoveredState:
        """Where the rows are (the ``messages_page`` index alone; no message is read)."""
        state, self._state = self._state, None
        if state is None:  # read at open; a later load() reads again
            self.commit()
            state = self._read_state()
        return state

    def _read_state(self) -> RecoveredState:
        state = RecoveredState()
        self.dropped = []
        for queue, level, count, first, last in self._db.execute(
                "SELECT queue, level, count(*), min(seq), max(seq) FROM messages "
                "GROUP BY queue, level ORDER BY queue, level"):
            state.runs.setdefault(queue, []).append(
                PageRun(int(level), int(first), int(last), int(count), True))
        for row in self._db.execute(
                "SELECT client_id, name, topic, selector, no_local, shared, queue "
                "FROM subscriptions ORDER BY rowid"):
            client_id, name, topic, selector, no_local, shared, queue = row
            state.subscriptions.append(SubscriptionRecord(
                client_id, name, topic, selector, bool(no_local), bool(shared), queue))
        return state

    def _decode(self, queue: str, message_id: str, data: bytes,
                row: tuple[object, ...]) -> ServerMessage | None:
        """A row back as a message: its columns, or the JSON of an older layout."""
        try:
            return decode_message(data) if data else from_row(message_id, row)
        except CodecError as exc:
            self._drop(queue, message_id, exc)
            return None

    def _drop(self, queue: str, message_id: str, exc: CodecError) -> None:
        """A row that cannot be read: counted, logged, skipped."""
        self.dropped.append((queue, message_id, str(exc)))
        log.warning("message store %s: dropped message %s of %s: %s",
                    self.path, message_id, queue, exc)

    def _read(self, sql: str, params: tuple[object, ...] | list[int], queue: str,
              first: int, last: int) -> list[Any]:
        """The rows ``sql`` reads (of ``queue``, between ``first`` and ``last``)."""
        try:
            return self._reading().execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise
            # damaged from outside while running: these rows are lost to this run (the
            # broker carries on; a restart salvages the file)
            self.dropped.append((queue, f"rows {first}-{last}", str(exc)))
            log.error("message store %s: cannot read rows %d-%d of %s: %s", self.path,
                      first, last, queue, exc)
            return []

    def page_in(self, queue: str, level: int, first: int, last: int, limit: int,
                dense: bool = False) -> list[tuple[int, StoredMessage | None]]:
        rows = self._read(_PAGE_DENSE if dense else _PAGE, (queue, level, first, last, limit),
                          queue, first, last)
        return self.decode_rows(queue, rows)

    def take_page(self, queue: str, level: int, first: int, last: int, limit: int,
                  dense: bool = False,
                  recovered: bool = False) -> tuple[list[Paged], int, int]:
        params = (queue, level, first, last, limit)
        if queue in self._wide:
            rows = self._read(_TAKE_WIDE[dense], params, queue, first, last)
            if 2 * sum(1 for row in rows if row[0] is not None) > len(rows):
                self._wide.discard(queue)  # mostly narrow rows again: the narrow read
            paged, read, seq = paged_rows(self.decode_rows(queue, [row[1:] for row in rows]),
                                          level, recovered)
            return paged, read, seq
        rows = self._read(_TAKE[dense], params, queue, first, last)
        if not rows:
            return [], 0, 0
        some, wide = narrow_paged(rows, level, recovered)
        if not wide:
            return cast("list[Paged]", some), len(rows), rows[-1][0]
        if 2 * len(wide) > len(rows):
            self._wide.add(queue)  # the next batch reads whole rows at once
        seqs = [rows[i][0] for i in wide]
        whole: dict[int, Any] = {}
        for at in range(0, len(seqs), _BY_SEQ_CHUNK):
            chunk = seqs[at:at + _BY_SEQ_CHUNK]
            sql = (f"SELECT {_READ} FROM messages WHERE seq IN "
                   f"({', '.join('?' * len(chunk))})")
            for row in self._read(sql, chunk, queue, chunk[0], chunk[-1]):
                whole[row[0]] = row
        for i, seq in zip(wide, seqs, strict=True):
            row = whole.get(seq)
            if row is not None:
                decoded, _, _ = paged_rows(self.decode_rows(queue, [row]), level, recovered)
                if decoded:
                    some[i] = decoded[0]
        return [p for p in some if p is not None], len(rows), rows[-1][0]

    def decode_rows(self, queue: str,
                     rows: list[Any]) -> list[tuple[int, StoredMessage | None]]:
        out: list[tuple[int, StoredMessage | None]] = []
        append = out.append
        for row in rows:  # (seq, id, delivery_count, data, *ROW_COLUMNS): the page-in loop
            seq = row[0]
            if row[3]:  # a row of layout 1 or 2: its JSON
                message = self._decode(queue, row[1], row[3], ())
            else:
                try:
                    message = from_row(row[1], row[4:])
                except CodecError as exc:
                    self._drop(queue, row[1], exc)
                    message = None
            append((seq, None if message is None else StoredMessage(message, row[2], seq)))
        return out

    def read_queue(self, queue: str) -> list[StoredMessage]:
        rows = self._reading().execute(
            f"SELECT {_READ} FROM messages WHERE queue = ? ORDER BY seq", (queue,)).fetchall()
        return [stored for _, stored in self.decode_rows(queue, rows) if stored is not None]

    def verify(self) -> dict[str, int]:
        """Read every row back (``jmspy broker --check``): readable messages per queue;
        the unreadable ones are in :attr:`dropped` afterwards."""
        self.commit()
        self.dropped = []
        counts: dict[str, int] = {}
        for queue, _seq, message_id, _count, data, *row in self._db.execute(
                f"SELECT queue, {_READ} FROM messages ORDER BY seq"):
            if self._decode(queue, message_id, data, row) is not None:
                counts[queue] = counts.get(queue, 0) + 1
        return counts

    def close(self) -> None:
        try:
            self.commit()
        except StoreWriteFailed as exc:  # closing: nothing is waiting for these writes
            log.error("message store %s: closing with writes not made: %s", self.path, exc)
        finally:
            if self.unmade_writes:
                log.error("message store %s: closing with %d writes not made (%s)",
                          self.path, self.unmade_writes, self.faulted)
            with contextlib.suppress(sqlite3.Error):
                self._db.close()

    # -- diagnostics ------------------------------------------------------------------------

    def stored_counts(self, queues: Collection[str] | None = None) -> dict[str, int]:
        db = self._reading()
        if queues is None:
            rows = db.execute("SELECT queue, count(*) FROM messages GROUP BY queue")
        else:  # one destination's stats: count its queues only (the (queue, id) index)
            names = list(queues)
            rows = db.execute(
                "SELECT queue, count(*) FROM messages WHERE queue IN "
                f"({', '.join('?' * len(names))}) GROUP BY queue", names)
        return {q: int(n) for q, n in rows}

    def message_ids(self, queue: str) -> list[str]:
        """Ids stored for ``queue`` in enqueue order (for tests and diagnostics)."""
        return [r[0] for r in self._reading().execute(
            "SELECT id FROM messages WHERE queue = ? ORDER BY seq", (queue,))]

    def delivery_count(self, queue: str, message_id: str) -> int | None:
        row = self._reading().execute(
            "SELECT delivery_count FROM messages WHERE queue = ? AND id = ?",
            (queue, message_id)).fetchone()
        return None if row is None else int(row[0])

    def copy_row(self, seq: int, values: tuple[object, ...]) -> None:
        """Write a row as salvage() read it from a damaged file (same columns)."""
        self._next_seq = max(self._next_seq, seq + 1)
        self._write(f"INSERT OR IGNORE INTO messages (seq, queue, id, delivery_count, data, "
                    f"level, {_COLUMNS}) VALUES ({', '.join('?' * (len(values) + 1))})",
                    (seq, *values))

    def copy_subscription(self, row: tuple[object, ...]) -> None:
        self._write("INSERT OR REPLACE INTO subscriptions (queue, client_id, name, topic, "
                    "selector, no_local, shared) VALUES (?, ?, ?, ?, ?, ?, ?)", row)

    def compact(self) -> None:
        """Give the space of consumed messages back to the file system (SQLite reuses it
        otherwise, but the file does not shrink): checkpoint the log, then VACUUM."""
        self.commit()
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.execute("VACUUM")
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    @property
    def location(self) -> str:
        return str(self.path)

    def health(self) -> dict[str, int | str | None]:
        """The salvage at open (recovered and lost rows, where the damaged file went),
        rows a read could not decode, why writes are refused now, and the messages
        consumed before the commit that would have written them."""
        state = self.fault_state()
        out: dict[str, int | str | None] = {
            "storeState": state,
            "storeFault": self.unusable or (
                self.faulted if state != "short of space" else
                "messages are stored again in the room acks freed, one write at a time, "
                "until the disk has room for the space reserve again (after: "
                f"{self.faulted})"),
            "storeDroppedRows": len(self.dropped),
            # messages consumed before their commit, never written (GroupWrites._commit)
            "storeMessagesUnwritten": self.unwritten,
        }
        if self.salvaged is not None:
            out.update(self.salvaged.as_stats())
        return out

    def size_bytes(self) -> int:
        """Bytes the stored data takes: the database's pages in use. Pages freed by
        consumed messages are not counted (SQLite reuses them; the file only shrinks on
        :meth:`compact`), so ``store-limit`` frees up as consumers take messages. The
        write-ahead log is a bounded window onto those pages, not counted either."""
        db = self._db
        (pages,) = db.execute("PRAGMA page_count").fetchone()
        (free,) = db.execute("PRAGMA freelist_count").fetchone()
        (size,) = db.execute("PRAGMA page_size").fetchone()
        return int((pages - free) * size)
