"""Recover what is intact from a damaged store file, instead of refusing to start.

SQLite survives a ``kill -9`` or a torn last write by itself (the write-ahead log's
checksums drop an incomplete commit). What it cannot survive is a file damaged from
outside -- truncated by a full disk or a bad copy, overwritten in the middle: opening it or
reading a page raises "database disk image is malformed". A broker should then do what
ActiveMQ does with a damaged KahaDB journal: keep every message it can still read, say
what it dropped, and start. :func:`salvage` moves the damaged file aside (kept for a
person to look at), copies every readable message row and subscription into a fresh
store, and reports.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .message_codec import ROW_COLUMNS

__all__ = ["SalvageReport", "salvage"]

log = logging.getLogger("jmspy.broker.store")

_CHUNK = 500


@dataclass(slots=True)
class SalvageReport:
    damaged: Path  #: where the damaged file was moved
    kept: int = 0  #: message rows copied into the new store
    lost_ranges: list[tuple[int, int]] = field(default_factory=list)  #: unreadable seqs
    subscriptions: int = 0
    reason: str = ""

    def describe(self) -> str:
        lost = ", ".join(f"{a}-{b}" for a, b in self.lost_ranges[:10]) or "none found"
        return (f"the message store was damaged ({self.reason}); kept {self.kept:,} messages "
                f"and {self.subscriptions} durable subscriptions, unreadable row ranges: "
                f"{lost}. The damaged file is kept at {self.damaged}")


def salvage(path: Path, reason: str) -> SalvageReport:
    """Move ``path`` aside and write a new store at ``path`` from its readable rows."""
    from .sqlite_store import SqliteStore  # the new store: this module is its helper

    damaged = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    path.rename(damaged)
    for suffix in ("-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        if side.exists():
            side.rename(Path(f"{damaged}{suffix}"))
    report = SalvageReport(damaged, reason=reason)
    fresh = SqliteStore(path, group_commit=True)
    readable = _readable_copy(damaged)
    try:
        old = sqlite3.connect(str(readable))
    except sqlite3.Error:
        fresh.close()
        return report
    columns = ["queue", "id", "delivery_count", "data", "level", *ROW_COLUMNS]
    try:
        have = {row[1] for row in old.execute("PRAGMA table_info(messages)")}
    except sqlite3.Error:
        have = set()
    wanted = [c if c in have else ("5" if c == "level" else "NULL") for c in columns]
    after = 0
    while have:
        rows: list[Any] | None
        try:
            rows = old.execute(f"SELECT seq, {', '.join(wanted)} FROM messages WHERE seq > ? "
                               "ORDER BY seq LIMIT ?", (after, _CHUNK)).fetchall()
        except sqlite3.DatabaseError:
            rows = _one_by_one(old, wanted, after, report)
            if rows is None:
                break
        if not rows:
            break
        for row in rows:
            fresh.copy_row(row[0], row[1:])
            report.kept += 1
        after = rows[-1][0]
    try:
        for row in old.execute("SELECT queue, client_id, name, topic, selector, no_local, "
                               "shared FROM subscriptions"):
            fresh.copy_subscription(row)
            report.subscriptions += 1
    except sqlite3.DatabaseError:
        pass
    old.close()
    for side in (readable, Path(f"{readable}-wal"), Path(f"{readable}-shm")):
        side.unlink(missing_ok=True)
    fresh.close()
    log.warning("message store %s: %s", path, report.describe())
    return report


def _readable_copy(damaged: Path) -> Path:
    """A copy of the damaged file that SQLite will read as far as it goes: a file cut
    short still claims its old size in its header (bytes 28-31), and SQLite calls the
    whole file malformed for it; the copy claims the whole pages it really has."""
    data = bytearray(damaged.read_bytes())
    copy = damaged.with_name(damaged.name + ".readable")
    if len(data) >= 100 and data.startswith(b"SQLite format 3\0"):
        page_size = int.from_bytes(data[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = len(data) // page_size
        del data[pages * page_size:]
        data[28:32] = pages.to_bytes(4, "big")
    copy.write_bytes(data)
    wal = Path(f"{damaged}-wal")
    if wal.exists():
        Path(f"{copy}-wal").write_bytes(wal.read_bytes())
    return copy


def _one_by_one(old: sqlite3.Connection, wanted: list[str], after: int,
                report: SalvageReport) -> list[Any] | None:
    """A chunk would not read: step over the bad rows one sequence number at a time, up
    to the highest the index still knows; None when nothing after ``after`` is readable."""
    try:
        (top,) = old.execute("SELECT max(seq) FROM messages").fetchone()
    except sqlite3.DatabaseError:
        top = after + 100_000
    seq = after + 1
    while top is not None and seq <= top:
        try:
            row = old.execute(f"SELECT seq, {', '.join(wanted)} FROM messages WHERE seq = ?",
                              (seq,)).fetchone()
        except sqlite3.DatabaseError:
            row = None
            _lose(report, seq)
        if row is not None:
            return [row]
        seq += 1
    return None


def _lose(report: SalvageReport, seq: int) -> None:
    ranges = report.lost_ranges
    if ranges and ranges[-1][1] == seq - 1:
        ranges[-1] = (ranges[-1][0], seq)
    else:
        ranges.append((seq, seq))
