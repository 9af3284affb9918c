"""A broker's data directory: the message store in it, and a lock so that one broker at a
time uses it.

Two brokers writing one SQLite file would not corrupt it (SQLite locks), but each would
recover the other's messages as its own and deliver them twice; so the second broker
refuses to start, naming the directory and the process that holds it. The lock is an
``flock`` on ``broker.lock``: the kernel releases it when the holder dies, even by
``kill -9``, so a crashed broker never leaves a stale lock behind.

Messages are private: the directory is made ``0700`` and every file in it ``0600``
(the store, SQLite's ``-wal``/``-shm``, the lock, the spool), whatever the umask.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO

from .store.sqlite_store import SqliteStore, StoreError
from .store.store_faults import RESERVE_BYTES

__all__ = ["CHECK_DAMAGED", "CHECK_HEALTHY", "CHECK_UNUSABLE", "STORE_FILE", "DataDirectory",
           "check"]

STORE_FILE = "messages.sqlite"
_LOCK_FILE = "broker.lock"
#: permission bits of the data directory and of every file in it
DIR_MODE = 0o700
FILE_MODE = 0o600


class DataDirectory:
    """An opened, locked data directory. ``store`` is its message store."""

    def __init__(self, path: str | os.PathLike[str], *, group_commit: bool = True,
                 salvage_damaged: bool = True) -> None:
        self.path = Path(path).resolve()
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"the data directory {self.path} is a file, not a directory; "
                             "choose another path with --data-dir (or [broker] data-dir)")
        try:
            self.path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            os.chmod(self.path, DIR_MODE)
            fd = os.open(self.path / _LOCK_FILE, os.O_RDWR | os.O_CREAT, FILE_MODE)
            os.fchmod(fd, FILE_MODE)
            lock: IO[str] = open(fd, "a+")  # noqa: SIM115 - held open
        except OSError as exc:
            raise StoreError(f"cannot use the data directory {self.path}: {exc.strerror}; "
                             "choose a writable directory with --data-dir") from exc
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.seek(0)
            holder = lock.read().strip() or "unknown"
            lock.close()
            raise StoreError(
                f"the data directory {self.path} is in use by another broker (pid {holder}); "
                "stop it, or give this broker its own --data-dir") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        self._lock: IO[str] | None = lock
        try:
            self.store = SqliteStore(self.path / STORE_FILE, group_commit=group_commit,
                                     salvage_damaged=salvage_damaged, mode=FILE_MODE,
                                     reserve=RESERVE_BYTES)
        except BaseException:
            self.release()
            raise

    @property
    def spool_dir(self) -> Path:
        """Where the broker's spool file goes (paged-out messages the store does not keep;
        emptied at every start)."""
        return self.path / "temp"

    def release(self) -> None:
        """Let another broker use the directory (the store must be closed first)."""
        lock, self._lock = self._lock, None
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()


#: ``jmspy broker --check`` exit codes
CHECK_HEALTHY = 0  #: the store is intact: every row reads back
CHECK_DAMAGED = 1  #: damage found; the report says what a starting broker recovers
CHECK_UNUSABLE = 2  #: nothing checked: no store there, unreadable, or in use


def check(path: str | os.PathLike[str]) -> tuple[int, list[str]]:
    """Verify the store in data directory ``path`` offline (``jmspy broker --check``) and
    say what a broker starting on it would do: (exit code, report lines).

    A check only reports: it changes nothing in the directory and creates nothing (not a
    missing directory, not a store). It takes the directory's lock if there is one (a
    running broker makes it fail), reads a private copy of the store and its log in the
    system's temp directory, runs on that copy exactly what a starting broker runs --
    the integrity check, and the salvage of a damaged file -- then reads every row back.
    """
    where = Path(path).resolve()
    if not where.is_dir():
        what = "is a file, not a data directory" if where.exists() else "does not exist"
        return CHECK_UNUSABLE, [f"{where} {what}: there is no message store to check "
                                "(nothing was created); give the broker's --data-dir"]
    store = where / STORE_FILE
    if not store.is_file():
        return CHECK_UNUSABLE, [f"no message store in {where} (no {STORE_FILE}; nothing "
                                "was created): is this the broker's --data-dir?"]
    lock: IO[str] | None = None
    try:
        if (where / _LOCK_FILE).exists():
            lock = open(where / _LOCK_FILE)  # noqa: SIM115 - closed below
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = lock.read().strip() or "unknown"
                return CHECK_UNUSABLE, [
                    f"the data directory {where} is in use by a running broker (pid "
                    f"{holder}): stop it first (a broker checks its store as it starts)"]
        scratch = Path(tempfile.mkdtemp(prefix="jmspy-check-"))
        try:
            return _check_copy(store, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    except OSError as exc:
        return CHECK_UNUSABLE, [f"cannot read the message store {store}: {exc.strerror or exc}"
                                "; check its permissions (run as the broker's user)"]
    finally:
        if lock is not None:
            lock.close()


def _check_copy(store: Path, scratch: Path) -> tuple[int, list[str]]:
    copy = scratch / STORE_FILE
    shutil.copyfile(store, copy)
    wal = Path(f"{store}-wal")
    if wal.exists():
        shutil.copyfile(wal, f"{copy}-wal")
    store_log = logging.getLogger("jmspy.broker.store")
    level = store_log.level
    store_log.setLevel(logging.CRITICAL)  # the report says it, naming the real file
    try:
        opened = SqliteStore(copy)
    except StoreError as exc:
        return CHECK_UNUSABLE, [f"cannot check the message store {store}: {exc}"]
    finally:
        store_log.setLevel(level)
    try:
        state = opened.load()
        counts = opened.verify()
        report = opened.salvaged
        lines = [f"{store}: {store.stat().st_size:,} bytes"]
        if report is not None:
            lines.append(
                f"DAMAGED FILE: {report.reason}. A broker starting on this directory moves "
                f"it aside as {STORE_FILE}.damaged-<UTC time> and keeps what it can read: "
                f"{report.kept:,} messages recovered, "
                + ("an unknown number lost (not one row of the file could be read)"
                   if report.lost_unknown else f"{report.lost:,} lost"
                   + ("" if report.lost_exact else " (at most: unreadable sequence numbers)"))
                + f", {report.subscriptions} durable subscriptions")
        if opened.was_empty:
            lines.append("EMPTY FILE: the store is 0 bytes. A broker starting on this "
                         "directory starts with no messages; a broker that opened it even "
                         "once leaves more than that, so if one stored messages here the "
                         "file was cut to nothing")
        for queue in sorted(state.runs):
            lines.append(f"  {queue}: {counts.get(queue, 0):,} messages")
        for sub in state.subscriptions:
            lines.append(f"  durable subscription {sub.name!r} on topic {sub.topic!r} "
                         f"(client id {sub.client_id!r})")
        for queue, message_id, why in opened.dropped:
            lines.append(f"  DAMAGED: message {message_id} of {queue}: {why}")
        total = sum(counts.values())
        lines.append(f"{total:,} messages, {len(state.subscriptions)} durable subscriptions"
                     + ("" if not opened.dropped else f", {len(opened.dropped)} damaged rows "
                        "(a broker starting here drops them and keeps the rest)"))
        healthy = report is None and not opened.dropped and not opened.was_empty
        lines.append("healthy: nothing to repair" if healthy else
                     "damage found; nothing was changed (the salvage runs when a broker "
                     "starts on this directory)")
        return (CHECK_HEALTHY if healthy else CHECK_DAMAGED), lines
    finally:
        opened.close()
