"""Recover what is intact from a damaged store file, instead of refusing to start or
serving nothing.

SQLite survives a ``kill -9`` or a torn last write by itself (the write-ahead log's
checksums drop an incomplete commit). What it cannot survive is a file damaged from
outside -- truncated by a full disk or a bad copy, overwritten in the middle, its header
zeroed: opening it, or reading a page, raises "database disk image is malformed" or "file
is not a database". A broker should then do what ActiveMQ does with a damaged KahaDB
journal: keep every message it can still read, say what it dropped, and start.

:func:`salvage` copies every readable message row and subscription into a new file next
to the damaged one (the table in order while it reads; where a page is broken, row by row
by sequence number -- the sequence numbers the indexes still list, or every one up to the
highest issued -- skipping the unreadable ones; then the rows no lookup could reach, read
from the file's leaf pages by :mod:`.salvage_pages`), then swaps it in: the damaged file keeps a
name of its own (``messages.sqlite.damaged-<UTC time>``, with its ``-wal``/``-shm``) for a
person to look at. The swap never leaves the store's name empty: a crash during salvage
finds the damaged file still in place and salvages it again.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .message_codec import ROW_COLUMNS
from .salvage_pages import table_rows

__all__ = ["SalvageReport", "salvage"]

log = logging.getLogger("jmspy.broker.store")

_CHUNK = 500
#: header bytes of a SQLite file that a zeroed header lost and a read needs back
_MAGIC = b"SQLite format 3\0"
_PAGE_SIZES = (4096, 1024, 2048, 8192, 16384, 32768, 65536, 512)
#: sequence numbers tried one by one past a broken page when nothing says how far
#: the table goes (neither the indexes nor the AUTOINCREMENT counter read)
_BLIND_STEP_LIMIT = 100_000


@dataclass(slots=True)
class SalvageReport:
    damaged: Path  #: where the damaged file was moved (or, for a check, where it is)
    kept: int = 0  #: message rows copied into the new store
    lost: int = 0  #: message rows that could not be read
    #: True when ``lost`` is the indexes' count of rows not read back; False: the count
    #: of unreadable sequence numbers (some of which may have held no message)
    lost_exact: bool = True
    lost_ranges: list[tuple[int, int]] = field(default_factory=list)  #: unreadable seqs
    subscriptions: int = 0
    reason: str = ""
    #: while salvaging: every sequence number a whole index lists (None: none read
    #: whole), those copied by SQLite's reads (None: the schema did not read), and the
    #: highest one issued
    listed: set[int] | None = field(default=None, repr=False)
    kept_seqs: set[int] | None = field(default=None, repr=False)
    top: int = field(default=0, repr=False)

    @property
    def lost_unknown(self) -> bool:
        """Nothing of the file read (no schema, no row, no index): how many messages it
        held, and so lost, cannot be told -- "0 lost" would say none were."""
        return not self.lost_exact and not self.lost and not self.kept

    def lost_text(self) -> str:
        if self.lost_unknown:
            return "an unknown number (not one row of the file could be read)"
        return f"{self.lost:,}" + ("" if self.lost_exact else
                                   " (unreadable sequence numbers: an upper bound)")

    def describe(self) -> str:
        lost = ", ".join(f"{a}-{b}" for a, b in self.lost_ranges[:10]) or "none"
        return (f"the message store was damaged ({self.reason}); recovered {self.kept:,} "
                f"messages and {self.subscriptions} durable subscriptions, lost "
                f"{self.lost_text()}; unreadable row ranges: {lost}. The damaged file "
                f"is kept at {self.damaged}")

    def as_stats(self) -> dict[str, int | str | None]:
        """The report as ``jmspy stat``'s usage keys."""
        return {"salvageRecovered": self.kept, "salvageLost": self.lost,
                "salvageLostExact": int(self.lost_exact),
                "salvageSubscriptions": self.subscriptions,
                "salvageDamagedFile": str(self.damaged), "salvageReason": self.reason}


def damaged_name(path: Path) -> Path:
    """``messages.sqlite.damaged-<UTC time>``, not yet taken."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    candidate = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    return candidate


class SalvageTarget(Protocol):
    """The new store the readable rows go into: the store module passes its own opener,
    so this helper sits below it and never imports it."""

    def copy_row(self, seq: int, values: tuple[object, ...]) -> None: ...

    def copy_subscription(self, row: tuple[object, ...]) -> None: ...

    def put_state(self, kind: str, key: str, data: bytes) -> None: ...

    def commit(self) -> None: ...

    def close(self) -> None: ...


def salvage(path: Path, reason: str, open_fresh: Callable[[Path], SalvageTarget]
            ) -> SalvageReport:
    """Replace the damaged store at ``path`` by a new one holding its readable rows;
    ``open_fresh(path)`` opens the new, empty store."""
    damaged = damaged_name(path)
    report = SalvageReport(damaged, reason=reason)
    fresh_path = path.with_name(f"{path.name}.salvage")
    readable = path.with_name(f"{path.name}.readable")
    for leftover in (fresh_path, readable):  # of a salvage a crash interrupted
        _unlink_all(leftover)
    _readable_copy(path, readable)
    fresh = open_fresh(fresh_path)
    try:
        _copy_rows(readable, fresh, report)
    finally:
        fresh.close()  # commits and checkpoints: the new file holds everything alone
        _unlink_all(readable)
    _swap(path, damaged, fresh_path)
    log.warning("message store %s: %s", path, report.describe())
    return report


def _unlink_all(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _swap(path: Path, damaged: Path, fresh: Path) -> None:
    """The damaged file (and its log) gets its new name first, as a second link, so that
    the store's own name is never missing; then the new file replaces it atomically."""
    for suffix in ("", "-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        if not side.exists():
            continue
        try:
            os.link(side, f"{damaged}{suffix}")
            if suffix:
                side.unlink()
        except OSError:  # a file system without hard links: a plain rename
            side.rename(f"{damaged}{suffix}")
    os.replace(fresh, path)
    with contextlib.suppress(OSError):
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _readable_copy(damaged: Path, copy: Path) -> None:
    """A copy of the damaged file that SQLite will read as far as it goes: a file cut
    short still claims its old size in its header (bytes 28-31), and SQLite calls the
    whole file malformed for it; a zeroed header gets a plausible one back (the page size
    from the log's header, or the one whose first page reads as a table). Copied and
    patched in place, not read into memory: a store may be many GB."""
    shutil.copyfile(damaged, copy)
    wal = Path(f"{damaged}-wal")
    wal_head = b""
    if wal.exists():
        shutil.copyfile(wal, f"{copy}-wal")
        with open(wal, "rb") as f:
            wal_head = f.read(32)
    size = copy.stat().st_size
    if size < 100:
        return
    with open(copy, "r+b") as f:
        first = f.read(max(_PAGE_SIZES) + 1)  # the header and each candidate page 2 start
        header = bytearray(first[:100])
        if not first.startswith(_MAGIC):
            header[:] = _header(first, size, wal_head)
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        if page_size >= 512:
            pages = size // page_size
            f.truncate(pages * page_size)
            header[28:32] = pages.to_bytes(4, "big")
        f.seek(0)
        f.write(header)


def _header(data: bytes, size: int, wal: bytes) -> bytes:
    """A database header for a file of ``size`` bytes whose own is gone (zeroed,
    overwritten); ``data``: the file's first bytes (up to the largest page and one)."""
    sizes: list[int] = list(_PAGE_SIZES)
    if len(wal) >= 32:  # the write-ahead log names the page size at bytes 8-11
        from_wal = int.from_bytes(wal[8:12], "big")
        if from_wal in sizes:
            sizes.remove(from_wal)
            sizes.insert(0, from_wal)
    best = sizes[0]
    for page in sizes:  # page 1's b-tree header follows the 100-byte file header
        if len(data) > page and data[100] in (0x05, 0x0D) and data[page] in (
                0x02, 0x05, 0x0A, 0x0D, 0x00):
            best = page
            break
    header = bytearray(100)
    header[:16] = _MAGIC
    header[16:18] = (1 if best == 65536 else best).to_bytes(2, "big")
    header[18:20] = bytes((2, 2)) if wal else bytes((1, 1))  # WAL: its frames are read
    header[21:24] = bytes((64, 32, 32))
    header[24:28] = (1).to_bytes(4, "big")
    header[28:32] = (size // best).to_bytes(4, "big")
    header[40:44] = (1).to_bytes(4, "big")  # schema cookie
    header[44:48] = (4).to_bytes(4, "big")  # schema format
    header[56:60] = (1).to_bytes(4, "big")  # UTF-8
    header[92:96] = (1).to_bytes(4, "big")
    header[96:100] = sqlite3.sqlite_version_info[0].to_bytes(4, "big")
    return bytes(header)


def _copy_rows(readable: Path, fresh: SalvageTarget, report: SalvageReport) -> None:
    try:
        old = sqlite3.connect(str(readable))  # a private copy: read, then deleted
    except sqlite3.Error:
        return
    try:
        # the log's pages into the file, so that a scan of its pages reads the newest
        with contextlib.suppress(sqlite3.Error):
            old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if _copy_messages(old, fresh, report):
            _copy_scanned_messages(old, table_rows(readable), fresh, report)
        try:
            for row in old.execute("SELECT queue, client_id, name, topic, selector, "
                                   "no_local, shared FROM subscriptions"):
                fresh.copy_subscription(row)
                report.subscriptions += 1
        except sqlite3.DatabaseError:
            for row in table_rows(readable):
                if _is_subscription(row[1]):
                    fresh.copy_subscription(tuple(row[1]))
                    report.subscriptions += 1
        # the protocol hosts' records (MQTT sessions, retained messages): what SQLite
        # still reads of them (none in a file older than the table)
        with contextlib.suppress(sqlite3.DatabaseError):
            for kind, key, data in old.execute("SELECT kind, key, data FROM protocol_state"):
                fresh.put_state(kind, key, data)
    finally:
        old.close()


def _copy_messages(old: sqlite3.Connection, fresh: SalvageTarget,
                   report: SalvageReport) -> bool:
    """Copy what SQLite still reads of the messages table; True when rows (or the
    schema) would not read, so that the file's pages are worth scanning for them."""
    columns = ["queue", "id", "delivery_count", "data", "level", *ROW_COLUMNS]
    try:
        have = {row[1] for row in old.execute("PRAGMA table_info(messages)")}
    except sqlite3.DatabaseError:
        have = set()
    if not have:
        report.lost_exact = False  # the schema itself is unreadable: nothing to count
        return True
    wanted = [c if c in have else ("5" if c == "level" else "NULL") for c in columns]
    select = f"SELECT seq, {', '.join(wanted)} FROM messages"
    listed_set, complete = _listed_seqs(old)
    listed = sorted(listed_set)
    top = max(_issued_top(old), listed[-1] if listed else 0)
    kept: set[int] = set()
    after = 0
    while True:
        try:
            rows = old.execute(f"{select} WHERE seq > ? ORDER BY seq LIMIT ?",
                               (after, _CHUNK)).fetchall()
        except sqlite3.DatabaseError:
            rows, after = _row_by_row(old, select, after, top, listed, report)
        if not rows:
            break
        for row in rows:
            fresh.copy_row(row[0], row[1:])
            kept.add(row[0])
        fresh.commit()  # the writes of a commit are kept until it: a chunk at a time
        after = max(after, rows[-1][0])
    report.kept = len(kept)
    report.listed = listed_set if complete else None
    report.kept_seqs = kept
    report.top = top
    if complete:  # the index lists every row the table had: lost is exact
        report.lost = len(listed_set - kept)
        report.lost_exact = True
    else:
        report.lost = sum(b - a + 1 for a, b in report.lost_ranges)
        report.lost_exact = False
    return bool(report.lost_ranges)


def _table_columns(old: sqlite3.Connection) -> list[str]:
    """The messages table's columns in their record order (the schema's, or the one this
    store has written since layout 3 when the schema does not read)."""
    try:
        names = [str(row[1]) for row in old.execute("PRAGMA table_info(messages)")]
    except sqlite3.DatabaseError:
        names = []
    return names or ["seq", "queue", "id", "delivery_count", "data", "level",
                     *ROW_COLUMNS]


def _copy_scanned_messages(old: sqlite3.Connection, scan: Iterable[tuple[int, list[object]]],
                           fresh: SalvageTarget, report: SalvageReport) -> None:
    """Message rows found on the pages that SQLite could not reach, taken when their
    sequence number was not read already (and, when an index read whole, is listed by
    it). A row still in a leaf's cells is live: a delete takes it out of them, and a
    page given up goes to the free list, which the scan skips. (On a broken tree a
    lookup's "no such row" proves nothing: it may have followed a wrong page.)"""
    names = _table_columns(old)
    at = {name: i for i, name in enumerate(names)}
    if not {"seq", "queue", "id", "delivery_count", "data"} <= at.keys():
        return
    columns = ["queue", "id", "delivery_count", "data", "level", *ROW_COLUMNS]
    defaults: dict[str, object] = {"level": 5}
    failed = {seq for a, b in report.lost_ranges for seq in range(a, b + 1)}
    looked_up = report.kept_seqs is not None
    kept = report.kept_seqs if report.kept_seqs is not None else set()
    scanned: set[int] = set()
    for seq, values in scan:
        if len(values) > len(names) or seq <= 0 or seq in kept or seq in scanned:
            continue
        row = values + [None] * (len(names) - len(values))
        if row[at["seq"]] is not None or not _message_shaped(row, at):
            continue
        if report.listed is not None and seq not in report.listed:
            continue
        fresh.copy_row(seq, tuple(row[at[c]] if c in at else defaults.get(c)
                                  for c in columns))
        scanned.add(seq)
        if len(scanned) % _CHUNK == 0:
            fresh.commit()
    report.kept += len(scanned)
    if report.listed is not None:
        report.lost = len(report.listed - kept - scanned)
        unread = sorted(report.listed - kept - scanned)
    else:
        top = max([report.top, *scanned]) if looked_up else max(scanned, default=0)
        unread = sorted(failed - scanned) if looked_up else [
            seq for seq in range(1, top + 1) if seq not in scanned]
        report.lost = len(unread)
        report.lost_exact = False
    report.lost_ranges = []
    for seq in unread:
        _lose(report, seq)


def _message_shaped(row: list[object], at: dict[str, int]) -> bool:
    queue = row[at["queue"]]
    return (isinstance(queue, str) and bool(queue) and isinstance(row[at["id"]], str)
            and isinstance(row[at["delivery_count"]], int)
            and isinstance(row[at["data"]], (bytes, str)))


def _is_subscription(values: list[object]) -> bool:
    """A subscriptions row (queue, client_id, name, topic, selector, no_local, shared)."""
    return (len(values) == 7 and isinstance(values[0], str) and bool(values[0])
            and isinstance(values[1], (str, type(None))) and isinstance(values[2], str)
            and isinstance(values[3], str) and isinstance(values[4], (str, type(None)))
            and isinstance(values[5], int) and isinstance(values[6], int))


def _listed_seqs(old: sqlite3.Connection) -> tuple[set[int], bool]:
    """Every sequence number an index of the messages table still lists, and whether the
    whole index read (then it is the table's exact row set)."""
    best: set[int] = set()
    for index in ("sqlite_autoindex_messages_1", "messages_page"):
        seqs: set[int] = set()
        try:
            for (seq,) in old.execute(f"SELECT seq FROM messages INDEXED BY {index} "
                                      "WHERE queue IS NOT NULL"):
                seqs.add(int(seq))
        except sqlite3.DatabaseError:
            best |= seqs
            continue
        return seqs, True
    return best, False


def _issued_top(old: sqlite3.Connection) -> int:
    """The highest sequence number ever issued (AUTOINCREMENT's counter), or the
    table's highest, or 0 when neither reads."""
    for sql in ("SELECT seq FROM sqlite_sequence WHERE name = 'messages'",
                "SELECT max(seq) FROM messages"):
        try:
            row = old.execute(sql).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None and row[0] is not None:
            return int(row[0])
    return 0


def _row_by_row(old: sqlite3.Connection, select: str, after: int, top: int,
                listed: list[int], report: SalvageReport) -> tuple[list[Any], int]:
    """A chunk would not read: step over the broken rows one sequence number at a time --
    those the indexes list, else every one up to ``top`` (or a bounded blind run) --
    until one reads. Returns ([that row], where the scan goes on) or ([], the end)."""
    candidates: Iterable[int]
    if listed:
        candidates = itertools.chain(
            itertools.islice(listed, bisect.bisect_right(listed, after), None),
            # the table may go past what the indexes still list
            range(max(listed[-1], after) + 1, top + 1))
    else:
        end = top if top > after else after + _BLIND_STEP_LIMIT
        candidates = list(range(after + 1, end + 1))
    for seq in candidates:
        try:
            row = old.execute(f"{select} WHERE seq = ?", (seq,)).fetchone()
        except sqlite3.DatabaseError:
            _lose(report, seq)
            continue
        if row is not None:
            return [row], seq
    return [], top


def _lose(report: SalvageReport, seq: int) -> None:
    ranges = report.lost_ranges
    if ranges and ranges[-1][1] == seq - 1:
        ranges[-1] = (ranges[-1][0], seq)
    else:
        ranges.append((seq, seq))
