"""The store's writes as one open transaction, and what happens when one fails.

A :class:`~.sqlite_store.SqliteStore` with group commit gathers the writes of a loop turn
-- many connections' SENDs and ACKs -- in one SQLite transaction and commits them at once.
A full disk or an I/O error can strike any write or that commit, and SQLite may then roll
back the whole transaction by itself. :class:`GroupWrites` keeps the open transaction's
writes (a journal), so a failed one is rolled back and redone write by write, each its own
commit: only the writes that really cannot be made are lost to it, and the writers whose
messages they were are named (:meth:`GroupWrites.take_failed_writers`) so their host sends
them an ERROR instead of a RECEIPT. Until writes succeed again the store commits each
write alone: a SEND that cannot be stored fails by itself, before the broker takes it.
Writes that are not messages (an ack's delete, a delivery count) are kept and redone, not
failed: an ack must not fail because the disk is full. :mod:`.store_faults` says which
failures are which, and why a store keeps a space reserve.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

__all__ = ["GroupWrites"]

log = logging.getLogger("jmspy.broker.store")


@dataclass(slots=True, eq=False)
class _Entry:
    """One write of an open transaction (or kept to be redone): the statement, who
    made it, and the message it stores, if it stores one."""

    sql: str
    params: tuple[object, ...]
    writer: object | None
    add: tuple[str, str] | None



class GroupWrites:
    """Transactions, group commit and write failures of a store on one SQLite connection
    (``_db``, opened by the subclass)."""

    _db: sqlite3.Connection

    def __init__(self, path: Path, group_commit: bool, reserve: int) -> None:
        self.path = path
        self.group_commit = group_commit
        self._depth = 0  # nested batch() blocks
        self._savepoints = 0
        self._in_tx = False
        #: the writes of the open transaction, in order, to redo one by one if its commit
        #: fails (store_faults); where the outermost open batch() began in it
        self._journal: list[_Entry] = []
        self._batch_start = 0
        #: the open transaction's net effect (:meth:`_commit` elides one that has none):
        #: the message rows it made that are still there, and whether every one of its
        #: writes only made, changed or dropped rows it made itself
        self._made: set[tuple[str, str]] = set()
        self._only_own = True
        #: adds kept for the commit instead of made at once (:meth:`_defer_add`): a
        #: message consumed before the commit never reaches SQLite
        self._deferred: dict[tuple[str, str], _Entry] = {}
        #: persistent messages removed before the commit that would have written them: an
        #: add kept for it and dropped, or one rolled back with a transaction of no effect
        self.unwritten = 0
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
        self._failing = False  # the last write failed (none succeeded since)
        #: disk space held back for the moment the disk fills (store_faults.SpaceReserve)
        self._reserve = SpaceReserve(self.path.with_name(f"{self.path.name}.reserve"),
                                     reserve)

    def _execute(self, sql: str, params: tuple[object, ...] | list[object] = ()) -> Any:
        """The one place a statement reaches SQLite (the write seam: tests make it fail
        the way a full disk or a broken one does)."""
        return self._db.execute(sql, params)

    def _begin(self) -> None:
        self._execute("BEGIN")
        self._in_tx = True
        self._made.clear()
        self._only_own = True

    def _new_row(self, params: tuple[object, ...], row: Any) -> bool:
        """Whether the add that ran with ``params`` and returned ``row`` made a new row
        (rather than overwriting one of the same message). Not known here: assume not,
        which only ever costs an fsync; the store that knows overrides it."""
        return False

    def _defer_add(self, sql: str, params: tuple[object, ...], key: tuple[str, str]) -> bool:
        """Keep the add of message ``key`` for the commit rather than make it now, when
        nothing can tell the difference: group commit, outside ``batch()`` (whose
        rollback could not undo what is not made), while writes go through, and not the
        same message twice. False: the caller makes it now. The caller must not need
        the row's sequence number back (an add onto an existing row keeps that row's)."""
        if (not self.group_commit or self._depth or self.faulted is not None
                or self.unusable is not None or self._retry or key in self._deferred):
            return False
        self._deferred[key] = _Entry(sql, params, self.writer, key)
        return True

    def _make_deferred(self) -> None:
        """Make the kept adds, in order: before the commit, any read, and any write
        that is not one other message's. One that cannot be made names its writer, as a
        failed group commit does (:meth:`take_failed_writers`)."""
        if not self._deferred:
            return
        entries = list(self._deferred.values())
        self._deferred.clear()
        writer = self.writer
        try:
            for entry in entries:
                if self.unusable is not None:  # nothing made now would be kept
                    if entry.writer is not None:
                        self._failed_writers.add(entry.writer)
                    continue
                if self.faulted is not None and not self._in_tx:
                    self._redo(entry)  # one failed: the rest one by one, as in _recover
                    continue
                self.writer = entry.writer
                try:
                    self._write(entry.sql, entry.params, fetch=True, add=entry.add)
                except StoreWriteFailed:
                    if entry.writer is not None:
                        self._failed_writers.add(entry.writer)
        finally:
            self.writer = writer

    def _write(self, sql: str, params: tuple[object, ...], fetch: bool = False,
               add: tuple[str, str] | None = None, own: tuple[str, str] | None = None,
               drops: bool = False) -> Any:
        """Run one write in the open transaction (committing it unless batched or group
        commit); ``fetch``: its RETURNING row, read before the commit needs it done.
        ``add``: the (queue, message id) this write stores -- a write that stores a
        message fails loudly (:class:`StoreWriteFailed`), any other one is kept to be
        redone once the store writes again (an ack's delete must not fail the ack).
        ``own``: the one message row this write changes (``drops``: deletes); a write
        that names none may change anything, so its transaction is always committed."""
        if self._deferred:
            key = own if own is not None else add
            if own is not None and drops and not self._depth and own in self._deferred:
                del self._deferred[own]  # stored and gone before the commit: never made
                self.unwritten += 1
                return None
            if key is None or key in self._deferred:
                self._make_deferred()
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
                self._begin()
            cursor = self._execute(sql, params)
            row = cursor.fetchone() if fetch else None
            if add is not None and self._new_row(params, row):
                self._made.add(add)
            elif own is not None and own in self._made:
                if drops:
                    self._made.discard(own)
            else:
                self._only_own = False
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
            self._commit(group=False)  # this write alone: its failure is its caller's
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
        self._failing = True
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

    def _redo(self, entry: _Entry, first: bool = True) -> bool:
        """Make one write on its own (autocommit); a failure keeps it for later and, the
        ``first`` time, names the writer whose RECEIPT can no longer promise its message."""
        try:
            self._execute(entry.sql, entry.params).fetchall()
        except (sqlite3.Error, OSError) as exc:
            self._fault(exc)
            self._retry.append(entry)
            if first and entry.add is not None and entry.writer is not None:
                self._failed_writers.add(entry.writer)
            return False
        self._io_errors = 0
        self._failing = False
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
            self._redo(entry, first=False)
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

    def refusal(self) -> str | None:
        """Why a message would be refused now without trying (the disk is full and
        nothing freed room since; the store is unusable), or None: a caller that must
        not fail half-way (a transaction's commit) asks first."""
        if self.unusable is not None:
            return self.unusable
        if self._space_fault and not self._room_for_adds():
            return self.faulted or "the broker's store is full"
        return None

    def open_on_a_full_disk(self, exc: BaseException) -> bool:
        """Opening the store failed with ``exc`` on a disk with no room left (SQLite
        must write its log and the log's index to open it): give the space reserve back
        so that it opens, refusing SENDs for space from the start, as a running store
        does once the disk fills -- its consumers are then served and their acks free
        room. False, changing nothing, when the disk is not full or no reserve is held."""
        try:
            full = free_bytes(self.path.parent) < max(self._reserve.size, 1 << 20) // 2
        except OSError:
            return False
        if not full or not self._reserve.held or not self._reserve.release():
            return False
        self._space_fault = True
        self._failing = True
        self.faulted = describe(SPACE, exc, self.path)
        log.error("message store %s: the disk is full (%s): gave its %d-byte space reserve "
                  "back to open the store; consumers are served and SENDs refused until "
                  "acks or the disk free room", self.path, exc, self._reserve.size)
        return True

    def fault_state(self) -> str:
        """How the store stands for its stats: ``ok``; ``refusing writes`` (the last
        write failed, or the disk is full and nothing freed room since); ``short of
        space`` (after a full disk, writes succeed again and messages are taken in the
        room freed, one write at a time until the space reserve is held again);
        ``unusable``."""
        if self.unusable is not None:
            return "unusable"
        if self.faulted is None:
            return "ok"
        if self._space_fault and not self._failing and self._room_for_adds():
            return "short of space"
        return "refusing writes"

    def take_failed_writers(self) -> set[object]:
        """The writers (:attr:`writer` when they wrote) whose stored messages a failed
        group commit could not keep; each is told once."""
        failed, self._failed_writers = self._failed_writers, set()
        return failed

    @property
    def pending(self) -> bool:
        """Writes not yet committed (group commit)."""
        return self._in_tx or bool(self._deferred)

    @property
    def out_of_space(self) -> bool:
        """The last failure was the disk filling (not another I/O error), and the store
        has not written normally since."""
        return self._space_fault

    @property
    def must_sync(self) -> bool:
        """Pending writes whose commit will reach the disk: not the ones with no net
        effect, which :meth:`commit` rolls back (or never makes) at no cost."""
        return bool(self._deferred) or (self._in_tx and not (self._only_own and not self._made))

    def commit(self) -> None:
        """Make every write so far durable (one fsync). Cheap when there is none. With
        group commit, a commit that fails for space or I/O is redone write by write
        (:meth:`_recover`): what cannot be kept is named by :meth:`take_failed_writers`,
        and it does not raise; without, see :meth:`_commit`."""
        self._commit(self.group_commit)

    def _commit(self, group: bool) -> None:
        """Commit; ``group``: the transaction holds many writers' work (see
        :meth:`commit`), else one operation's, which fails whole: rolled back, raising
        :class:`StoreWriteFailed` if it stored messages (its other writes are kept to
        be redone: an ack must not fail for a full disk). The adds kept for it are
        made first (:meth:`_make_deferred`).

        A transaction with no net effect -- every message it stored was also removed in
        it, as when a consumer waiting with ``ack:auto`` takes a persistent message in
        the loop turn that stored it -- is rolled back instead: the file then holds what
        the commit would have left, without the log write and the fsync (ActiveMQ's
        concurrent store and dispatch and RabbitMQ's message store skip the same writes)."""
        if self._deferred and self._depth == 0:
            self._make_deferred()
        if self._in_tx and self._depth == 0:
            elide = self._only_own and not self._made
            try:
                if elide:
                    self._execute("ROLLBACK")
                else:
                    if not self.path.exists():  # unlinked: writes would go to a ghost inode
                        raise OSError(errno.ENOENT, "the store file was removed",
                                      str(self.path))
                    self._execute("COMMIT")
            except (sqlite3.Error, OSError) as exc:
                kind = self._fault(exc)
                if group:
                    self._recover(len(self._journal))
                    return
                entries, self._journal = self._journal, []
                self._recover(0)
                self._retry.extend(e for e in entries if e.add is None)
                if any(e.add is not None for e in entries):
                    raise StoreWriteFailed(describe(kind, exc, self.path)) from exc
                return
            self._in_tx = False
            if elide:  # nothing reached the disk, so nothing says it writes again
                self.unwritten += sum(e.add is not None for e in self._journal)
                self._journal = []
            else:
                self._journal = []
                self._io_errors = 0
                self._failing = False
                self._back_to_normal()
        if self._retry and not self._in_tx:
            self._redo_retries()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        self._make_deferred()  # outside the savepoint: a failed batch must not undo them
        if not self._in_tx:
            self._begin()
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
                self._only_own = False  # what it undid of _made is not known: commit
            raise
        finally:
            self._depth -= 1
            if not self._broken:
                self._execute(f"RELEASE {name}")
            elif self._depth == 0:
                self._broken = False
        if self._depth == 0 and (not self.group_commit or self.faulted is not None):
            self._commit(group=False)  # this batch alone: fails whole


    @property
    def unmade_writes(self) -> int:
        """Writes kept to be redone once the store writes again."""
        return len(self._retry)

    def hold_reserve(self) -> int:
        """Take the space reserve (at open); its size, 0 when there is none. Not while
        it is given back for a full disk (it comes back once the disk has room)."""
        if self._space_fault:
            return self._reserve.size
        if self._reserve.size and not self._reserve.ensure():
            log.warning("message store %s: no room for its %d-byte space reserve; a full "
                        "disk may then stop even acks until space is freed", self.path,
                        self._reserve.size)
        return self._reserve.size

    def forget_unstored(self, queue: str, message_id: str) -> None:
        """A message whose write is kept for later left the broker (acked, expired):
        it is not to be stored any more."""
        if self._retry:
            key = (queue, message_id)
            self._retry = [e for e in self._retry if e.add != key]
