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
import errno
import logging
import os
import sqlite3
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from jmspy import twins

from .api import ServerMessage
from .message_codec import ROW_COLUMNS, CodecError, decode_message, from_row, to_row
from .page_rows import PACKED
from .records import priority_level
from .salvage import SalvageReport, salvage
from .store import (
    Paged,
    PageRun,
    RecoveredState,
    StoredMessage,
    SubscriptionRecord,
    paged_rows,
)
from .store_faults import (
    IO,
    IO_ERRORS_UNUSABLE,
    SPACE,
    UNUSABLE,
    SpaceReserve,
    StoreWriteFailed,
    classify,
    describe,
    free_bytes,
)

__all__ = ["DamagedStoreError", "SqliteStore", "StoreError", "StoreWriteFailed"]

log = logging.getLogger("jmspy.broker.store")

#: The layout this jmspy writes (``PRAGMA user_version``). 1: the first (the message as
#: JSON in ``data``, no ``level``); 2: ``level`` and the ``messages_page`` index, read by
#: paging (seed 002); 3: one column per message field (``message_codec.ROW_COLUMNS``),
#: ``data`` empty -- rows of layouts 1 and 2 keep their JSON and are read as such.
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


_INSERT = (
    f"INSERT INTO messages (queue, id, delivery_count, data, level, {_COLUMNS}) VALUES "
    f"(?, ?, 0, x'', ?, {', '.join('?' * len(ROW_COLUMNS))}) ON CONFLICT (queue, id) DO "
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
#: into messages by the ``page_rows`` twin, whose docstring says why.
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

_page_rows = twins.page_rows


@dataclass(slots=True, eq=False)
class _Entry:
    """One write of an open transaction (or kept to be redone): the statement, who
    made it, and the message it stores, if it stores one."""

    sql: str
    params: tuple[object, ...]
    writer: object | None
    add: tuple[str, str] | None


class StoreError(Exception):
    """The store cannot be used (named path, what is wrong, what to do)."""


class DamagedStoreError(StoreError):
    """The store file is damaged and was not salvaged (``salvage_damaged=False``)."""


class SqliteStore:
    """A :class:`~.store.Store` in one SQLite file (see the module docstring)."""

    def __init__(self, path: str | Path, *, group_commit: bool = False,
                 salvage_damaged: bool = True, mode: int = 0o600, reserve: int = 0) -> None:
        self.path = Path(path)
        #: the permission bits of the store's files (the ``-wal``/``-shm`` SQLite makes
        #: take the main file's), whatever the umask
        self.mode = mode
        self.group_commit = group_commit
        #: (queue, message id, why) of every row a load() could not read
        self.dropped: list[tuple[str, str, str]] = []
        self._depth = 0  # nested batch() blocks
        self._savepoints = 0
        self._in_tx = False
        #: the writes of the open transaction, in order, to redo one by one if its commit
        #: fails (store_faults); where the outermost open batch() began in it
        self._journal: list[_Entry] = []
        self._batch_start = 0
        self._broken = False  # a failure rolled back the open batch()es' savepoints
        #: writes that failed for space or I/O, redone before the next one
        self._retry: list[_Entry] = []
        self._failed_writers: set[object] = set()
        self._io_errors = 0
        #: who is writing now (the STOMP host sets its connection): a failed group commit
        #: names the writers whose messages it could not keep
        self.writer: object | None = None
        #: why writes fail now (None: they do not); why the store cannot be used at all
        self.faulted: str | None = None
        self.unusable: str | None = None
        self._space_fault = False  # the disk filled (not merely an I/O error)
        #: disk space held back for the moment the disk fills (store_faults.SpaceReserve)
        self._reserve = SpaceReserve(self.path.with_name(f"{self.path.name}.reserve"),
                                     reserve)
        #: queues whose last page-in was mostly rows the narrow read cannot carry
        self._wide: set[str] = set()
        #: what salvage() kept of a damaged file this store replaced (None: not damaged)
        self.salvaged: SalvageReport | None = None
        try:
            try:
                self._open()
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, sqlite3.OperationalError) or not self.path.exists():
                    raise
                self._db.close()
                if not salvage_damaged:
                    raise DamagedStoreError(
                        f"the message store {self.path} is damaged: {exc}") from exc
                self.salvaged = salvage(self.path, str(exc), mode=mode)
                self._open()
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot open the message store {self.path}: {exc}. Check that the data "
                "directory is a writable directory on a local disk with free space (a "
                "damaged file is moved aside by a broker starting on it, which keeps what "
                "it can still read)") from exc

    def _open(self) -> None:
        """Open, upgrade, and read where the rows are (which also proves the index is
        readable: a damaged file fails here, and is salvaged, rather than mid-dispatch)."""
        self._own_files()
        if self._reserve.size and not self._reserve.ensure():
            log.warning("message store %s: no room for its %d-byte space reserve; a full "
                        "disk may then stop even acks until space is freed", self.path,
                        self._reserve.size)
        self._db = sqlite3.connect(str(self.path), isolation_level=None,
                                   check_same_thread=False)
        problems = [row[0] for row in self._db.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:  # damaged where the index does not look (table pages)
            raise sqlite3.DatabaseError(
                "integrity check failed: " + "; ".join(str(p) for p in problems))
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        if self._reserve.size:  # the log never outgrows what the reserve can checkpoint
            (page,) = self._db.execute("PRAGMA page_size").fetchone()
            pages = max(100, min(1000, self._reserve.size // int(page) // 2))
            self._db.execute(f"PRAGMA wal_autocheckpoint = {pages}")
        self._migrate()
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

    # -- transactions ---------------------------------------------------------------------

    def _execute(self, sql: str, params: tuple[object, ...] | list[object] = ()) -> Any:
        """The one place a statement reaches SQLite (the write seam: tests make it fail
        the way a full disk or a broken one does)."""
        return self._db.execute(sql, params)

    def _write(self, sql: str, params: tuple[object, ...], fetch: bool = False,
               add: tuple[str, str] | None = None) -> Any:
        """Run one write in the open transaction (committing it unless batched or group
        commit); ``fetch``: its RETURNING row, read before the commit needs it done.
        ``add``: the (queue, message id) this write stores -- a write that stores a
        message fails loudly (:class:`StoreWriteFailed`), any other one is kept to be
        redone once the store writes again (an ack's delete must not fail the ack)."""
        self._state = None  # what open() read is out of date
        if self.unusable is not None:  # nothing written now would be kept
            if add is not None:
                raise StoreWriteFailed(self.unusable)
            return None
        if self._retry:
            self._redo_retries()
        if add is not None and self._space_fault and not self._room_for_adds():
            raise StoreWriteFailed(self.faulted or "the broker's store is full")
        entry = _Entry(sql, params, self.writer, add)
        try:
            if not self._in_tx:
                self._execute("BEGIN")
                self._in_tx = True
            cursor = self._execute(sql, params)
            row = cursor.fetchone() if fetch else None
        except (sqlite3.Error, OSError) as exc:
            kind = self._fault(exc)
            if add is not None:  # a batch storing messages fails whole
                self._recover(self._batch_start if self._depth else len(self._journal))
                raise StoreWriteFailed(describe(kind, exc, self.path)) from exc
            self._recover(len(self._journal))
            self._retry.append(entry)
            return None
        self._journal.append(entry)
        if self._depth == 0 and (not self.group_commit or self.faulted is not None):
            self.commit()
            if add is not None and entry in self._retry:  # its own commit failed
                self._retry.remove(entry)
                self._failed_writers.discard(entry.writer)
                raise StoreWriteFailed(self.faulted or "the store could not write")
        return row

    def _fault(self, exc: BaseException) -> str:
        """Count a failed write: what kind it was (store_faults); a store that will not
        write again is marked unusable, for the host to stop on."""
        kind = classify(exc, self.path)
        if kind is None:
            raise exc  # not a storage fault: a bug, let it be seen
        if kind == IO:
            self._io_errors += 1
            if self._io_errors >= IO_ERRORS_UNUSABLE:
                kind = UNUSABLE
        reason = describe(kind, exc, self.path)
        if kind == SPACE:
            self._space_fault = True
        if kind == UNUSABLE and self.unusable is None:
            self.unusable = reason
            log.critical("message store %s: %s", self.path, reason)
        elif self.faulted is None:
            log.error("message store %s: %s (refusing what cannot be stored, one write at "
                      "a time, until a write succeeds)", self.path, reason)
        self.faulted = reason
        return kind

    def _recover(self, keep: int) -> None:
        """The open transaction failed (SQLite may have rolled it back itself): roll it
        back and redo the first ``keep`` writes of it one at a time, each its own commit,
        so that only the writes that really cannot be made are lost to it."""
        entries, self._journal = self._journal[:keep], []
        with contextlib.suppress(sqlite3.Error, OSError):
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        self._in_tx = False
        self._broken = self._depth > 0  # the open batch()es lost their savepoints
        if self._space_fault and self._reserve.release():
            log.warning("message store %s: gave its %d-byte space reserve back to the disk "
                        "so that acks can still be written", self.path, self._reserve.size)
            with contextlib.suppress(sqlite3.Error, OSError):  # the log's pages: in place
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if self.unusable is not None:  # redone, they would not be kept either
            self._failed_writers.update(e.writer for e in entries
                                        if e.add is not None and e.writer is not None)
            return
        for entry in entries:
            self._redo(entry)

    def _redo(self, entry: _Entry) -> bool:
        """Make one write on its own (autocommit); a failure keeps it for later and names
        the writer whose RECEIPT can no longer promise its message."""
        try:
            self._execute(entry.sql, entry.params).fetchall()
        except (sqlite3.Error, OSError) as exc:
            self._fault(exc)
            self._retry.append(entry)
            if entry.add is not None and entry.writer is not None:
                self._failed_writers.add(entry.writer)
            return False
        self._io_errors = 0
        return True

    def _redo_retries(self) -> None:
        """Writes kept since a failure, redone first (in order) now that one is asked for:
        when they all go through the store writes as before (group commit again)."""
        if self._in_tx:
            return  # only between transactions: they were committed alone before
        entries, self._retry = self._retry, []
        # deletes and updates first: they free space (an add they follow is not kept:
        # remove_message drops it from here)
        for entry in sorted(entries, key=lambda e: e.add is not None):
            self._redo(entry)
        self._back_to_normal()

    def _room_for_adds(self) -> bool:
        """After the disk filled: whether a message may be tried -- the disk has room
        again (twice the reserve), or acks freed pages inside the store to reuse."""
        need = max(self._reserve.size, 1 << 20)
        try:
            if free_bytes(self.path.parent) >= 2 * need:
                return True
            (pages,) = self._db.execute("PRAGMA freelist_count").fetchone()
            (size,) = self._db.execute("PRAGMA page_size").fetchone()
        except (OSError, sqlite3.Error):
            return False
        return int(pages) * int(size) >= need // 2

    def _back_to_normal(self) -> None:
        """Every kept write made and (after a full disk) the reserve held again: group
        commit and unchecked adds again."""
        if self.faulted is None or self.unusable is not None or self._retry:
            return
        if self._space_fault and self._reserve.size and not self._reserve.held:
            try:
                if free_bytes(self.path.parent) < 2 * self._reserve.size:
                    return
            except OSError:
                return
            if not self._reserve.ensure():
                return
        log.warning("message store %s: writing again", self.path)
        self.faulted = None
        self._space_fault = False

    def take_failed_writers(self) -> set[object]:
        """The writers (:attr:`writer` when they wrote) whose stored messages a failed
        group commit could not keep; each is told once."""
        failed, self._failed_writers = self._failed_writers, set()
        return failed

    @property
    def pending(self) -> bool:
        """Writes not yet committed (group commit)."""
        return self._in_tx

    def commit(self) -> None:
        """Make every write so far durable (one fsync). Cheap when there is none. A commit
        that fails for space or I/O is redone write by write (:meth:`_recover`): what
        cannot be kept is named by :meth:`take_failed_writers`; it does not raise."""
        if self._in_tx and self._depth == 0:
            try:
                if not self.path.exists():  # unlinked: writes would go to a ghost inode
                    raise OSError(errno.ENOENT, "the store file was removed", str(self.path))
                self._execute("COMMIT")
            except (sqlite3.Error, OSError) as exc:
                self._fault(exc)
                self._recover(len(self._journal))
                return
            self._in_tx = False
            self._journal = []
            self._io_errors = 0
            self._back_to_normal()
        if self._retry and not self._in_tx:
            self._redo_retries()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        if not self._in_tx:
            self._execute("BEGIN")
            self._in_tx = True
        self._savepoints += 1
        name = f"b{self._savepoints}"
        self._execute(f"SAVEPOINT {name}")
        start = len(self._journal)
        if self._depth == 0:
            self._batch_start = start
        self._depth += 1
        try:
            yield
        except BaseException:
            if not self._broken:
                self._execute(f"ROLLBACK TO {name}")
                del self._journal[start:]
            raise
        finally:
            self._depth -= 1
            if not self._broken:
                self._execute(f"RELEASE {name}")
            elif self._depth == 0:
                self._broken = False
        if self._depth == 0 and (not self.group_commit or self.faulted is not None):
            self.commit()

    # -- the Store interface ----------------------------------------------------------------

    def add_message(self, queue: str, message: ServerMessage) -> int:
        # RETURNING: the same id again keeps its row (and sequence number), which
        # lastrowid would not tell
        row = self._write(_INSERT, (queue, message.message_id,
                                    priority_level(message.priority), *to_row(message)),
                          fetch=True, add=(queue, message.message_id))
        return 0 if row is None else int(row[0])  # None: committed alone, on a redo

    def remove_message(self, queue: str, message_id: str) -> None:
        if self._retry:  # a message never stored and now gone: not to be stored later
            key = (queue, message_id)
            self._retry = [e for e in self._retry if e.add != key]
        self._write("DELETE FROM messages WHERE queue = ? AND id = ?", (queue, message_id))

    def update_delivery_count(self, queue: str, message_id: str, count: int) -> None:
        self._write("UPDATE messages SET delivery_count = ? WHERE queue = ? AND id = ?",
                    (count, queue, message_id))

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
            return self._db.execute(sql, params).fetchall()
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
        some, wide = _page_rows.narrow_paged(rows, level, recovered)
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
        rows = self._db.execute(f"SELECT {_READ} FROM messages WHERE queue = ? ORDER BY seq",
                                (queue,)).fetchall()
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
        finally:
            if self._retry:
                log.error("message store %s: closing with %d writes not made (%s)",
                          self.path, len(self._retry), self.faulted)
            with contextlib.suppress(sqlite3.Error):
                self._db.close()

    # -- diagnostics ------------------------------------------------------------------------

    def stored_counts(self, queues: Collection[str] | None = None) -> dict[str, int]:
        if queues is None:
            rows = self._db.execute("SELECT queue, count(*) FROM messages GROUP BY queue")
        else:  # one destination's stats: count its queues only (the (queue, id) index)
            names = list(queues)
            rows = self._db.execute(
                "SELECT queue, count(*) FROM messages WHERE queue IN "
                f"({', '.join('?' * len(names))}) GROUP BY queue", names)
        return {q: int(n) for q, n in rows}

    def message_ids(self, queue: str) -> list[str]:
        """Ids stored for ``queue`` in enqueue order (for tests and diagnostics)."""
        return [r[0] for r in self._db.execute(
            "SELECT id FROM messages WHERE queue = ? ORDER BY seq", (queue,))]

    def delivery_count(self, queue: str, message_id: str) -> int | None:
        row = self._db.execute("SELECT delivery_count FROM messages WHERE queue = ? AND id = ?",
                               (queue, message_id)).fetchone()
        return None if row is None else int(row[0])

    def copy_row(self, seq: int, values: tuple[object, ...]) -> None:
        """Write a row as salvage() read it from a damaged file (same columns)."""
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
        rows a read could not decode, and why writes are refused now."""
        out: dict[str, int | str | None] = {
            "storeState": ("unusable" if self.unusable else
                           "refusing writes" if self.faulted else "ok"),
            "storeFault": self.unusable or self.faulted,
            "storeDroppedRows": len(self.dropped),
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
