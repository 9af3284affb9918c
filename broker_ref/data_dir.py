"""A broker's data directory: the message store in it, and a lock so that one broker at a
time uses it.

Two brokers writing one SQLite file would not corrupt it (SQLite locks), but each would
recover the other's messages as its own and deliver them twice; so the second broker
refuses to start, naming the directory and the process that holds it. The lock is an
``flock`` on ``broker.lock``: the kernel releases it when the holder dies, even by
``kill -9``, so a crashed broker never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from .core.sqlite_store import DamagedStoreError, SqliteStore, StoreError

__all__ = ["STORE_FILE", "DataDirectory", "check"]

STORE_FILE = "messages.sqlite"
_LOCK_FILE = "broker.lock"


class DataDirectory:
    """An opened, locked data directory. ``store`` is its message store."""

    def __init__(self, path: str | os.PathLike[str], *, group_commit: bool = True,
                 salvage_damaged: bool = True) -> None:
        self.path = Path(path).resolve()
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"the data directory {self.path} is a file, not a directory; "
                             "choose another path with --data-dir (or [broker] data-dir)")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            lock: IO[str] = open(self.path / _LOCK_FILE, "a+")  # noqa: SIM115 - held open
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
                                     salvage_damaged=salvage_damaged)
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


def check(path: str | os.PathLike[str]) -> tuple[bool, list[str]]:
    """Verify the store in data directory ``path`` offline (``jmspy broker --check``): read
    every row back as a starting broker would. Returns (intact, report lines); a broker
    using the directory makes it fail (the lock), as does a row that cannot be read."""
    try:  # a check changes nothing: a damaged file is reported, not moved aside
        data = DataDirectory(path, group_commit=False, salvage_damaged=False)
    except DamagedStoreError as exc:
        return False, [f"DAMAGED FILE: {exc}", "a broker starting on this directory moves the "
                       "file aside and keeps every message it can still read"]
    store = data.store
    try:
        state = store.load()
        counts = store.verify()
        lines = [f"{store.path}: {store.size_bytes():,} bytes"]
        for queue in sorted(state.runs):
            lines.append(f"  {queue}: {counts.get(queue, 0):,} messages")
        for sub in state.subscriptions:
            lines.append(f"  durable subscription {sub.name!r} on topic {sub.topic!r} "
                         f"(client id {sub.client_id!r})")
        for queue, message_id, why in store.dropped:
            lines.append(f"  DAMAGED: message {message_id} of {queue}: {why}")
        intact = not store.dropped
        total = sum(counts.values())
        lines.append(f"{total:,} messages, {len(state.subscriptions)} durable subscriptions"
                     + ("" if intact else f", {len(store.dropped)} damaged rows (a broker "
                        "starting here drops them and keeps the rest)"))
        return intact, lines
    finally:
        store.close()
        data.release()
