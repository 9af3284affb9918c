"""The store's background loader: reads the next batch of a paged-out queue before the
broker asks for it (seed 002's eager loading, off the broker's thread).

The broker core stays single-threaded and starts no thread: a host (the data directory
of ``jmspy broker`` and ``vm.start_broker``) gives its store one of these. A queue that pages a
batch in asks the store to *prefetch* the batch after it; a thread with its own read-only
SQLite connection runs that query (SQLite does the B-tree walk and the reads without
holding Python's GIL, so on a second core they overlap the broker's work) and turns the
rows into messages. When the queue next pages in, the batch is waiting.

Why this is safe without locks around the broker's state: a paged-out row is not in RAM,
so nothing the broker does can change it except deleting its whole queue (the store then
drops what was read ahead for it) or a selector consumer taking it out of order (the
queue skips those by sequence number, as for a synchronous read). The reader sees the
last committed state; commits are in sequence order, so a batch read ahead is a prefix of
what a synchronous read would return, never a row out of order.
"""

from __future__ import annotations

import logging
import queue as queue_module
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ReadAhead"]

log = logging.getLogger("jmspy.broker.store")

#: Batches kept waiting at most (a queue that stopped paging in leaves its batch behind).
_KEPT = 64

Key = tuple[str, int, int]  # (queue, level, first sequence number)
Decode = Callable[[str, list[Any]], list[Any]]


class ReadAhead:
    """One thread reading batches ahead for a :class:`~.sqlite_store.SqliteStore`.

    ``decode(queue, rows)`` turns fetched rows into what ``take`` returns; it runs on the
    thread and must not touch broker state.
    """

    def __init__(self, path: Path, decode: Decode) -> None:
        self._path = path
        self._decode = decode
        self._requests: queue_module.SimpleQueue[tuple[Key, str, tuple[Any, ...]] | None] = (
            queue_module.SimpleQueue())
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._ready: OrderedDict[Key, list[Any]] = OrderedDict()
        self._asked: set[Key] = set()
        self._dropped: set[str] = set()  # queues deleted while a read was under way
        self._thread: threading.Thread | None = None
        self._closed = False
        #: batches used / asked for (diagnostics)
        self.hits = 0
        self.asked = 0

    def ask(self, key: Key, sql: str, params: tuple[Any, ...]) -> None:
        """Read ``sql`` for ``key`` in the background, unless it is read or asked for."""
        with self._lock:
            if self._closed or key in self._asked or key in self._ready:
                return
            self._asked.add(key)
            self._dropped.discard(key[0])
        self.asked += 1
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="jmspy-store-read-ahead",
                                            daemon=True)
            self._thread.start()
        self._requests.put((key, sql, params))

    def take(self, key: Key) -> list[Any] | None:
        """The batch read for ``key``, if it is there (then it is handed over once)."""
        with self._lock:
            batch = self._ready.pop(key, None)
        if batch is not None:
            self.hits += 1
        return batch

    def put_back(self, key: Key, batch: list[Any]) -> None:
        """The rest of a batch ``take`` handed over, for the read that starts there."""
        with self._lock:
            if not self._closed:
                self._ready[key] = batch

    def forget(self, queue: str) -> None:
        """``queue`` was deleted: nothing read ahead for it may be used."""
        with self._lock:
            for key in [k for k in self._ready if k[0] == queue]:
                del self._ready[key]
            if any(k[0] == queue for k in self._asked):
                self._dropped.add(queue)

    def _run(self) -> None:
        try:
            db = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True,
                                 check_same_thread=False)
        except sqlite3.Error as exc:
            log.warning("message store %s: no read-ahead (%s); paging in reads inline",
                        self._path, exc)
            return
        try:
            while (item := self._requests.get()) is not None:
                key, sql, params = item
                try:
                    batch = self._decode(key[0], db.execute(sql, params).fetchall())
                except sqlite3.Error as exc:  # the broker's own read will say more
                    log.debug("read-ahead of %s failed: %s", key, exc)
                    batch = None
                with self._lock:
                    self._asked.discard(key)
                    if batch is not None and key[0] not in self._dropped:
                        self._ready[key] = batch
                        while len(self._ready) > _KEPT:
                            self._ready.popitem(last=False)
                    self._idle.notify_all()
        finally:
            db.close()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every batch asked for is read (tests, diagnostics)."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._asked, timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        if self._thread is not None:
            self._requests.put(None)
            self._thread.join(10)
