"""Why a store write failed, and what the broker does about it.

A broker whose disk fills up must refuse what it cannot keep, not crash and not pretend:
the SEND that cannot be stored gets an error naming the cause, everything else -- deliveries,
acks (which free space), other destinations -- carries on, and sends succeed again once
there is room (ActiveMQ's "store full" answer is the same refusal). Three kinds of failure:

* **space** -- SQLite's "database or disk is full" (``SQLITE_FULL``) or an ``OSError`` with
  ``ENOSPC``/``EDQUOT``: refused one write at a time until a write succeeds again;
* **I/O** -- any other ``SQLITE_IOERR`` or ``OSError``: refused the same way, but three in a
  row make the store unusable;
* **unusable** -- the file is gone, read-only, or no longer a database: nothing written from
  now on would be kept, so the broker stops for real (its host closes the listeners and
  exits non-zero with the reason) instead of serving connections it cannot answer truthfully.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from ..core.errors import ResourceLimitExceeded

__all__ = ["IO", "SPACE", "UNUSABLE", "StoreWriteFailed", "classify", "describe"]

SPACE = "space"
IO = "io"
UNUSABLE = "unusable"

#: SQLite's primary result codes (``sqlite3.Error.sqlite_errorcode & 0xff``)
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_CANTOPEN = 8, 10, 11, 14
_SQLITE_FULL, _SQLITE_NOTADB = 13, 26
_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_GONE = frozenset({_SQLITE_READONLY, _SQLITE_CORRUPT, _SQLITE_CANTOPEN, _SQLITE_NOTADB})

#: non-space I/O errors in a row (no write succeeding between) that make a store unusable
IO_ERRORS_UNUSABLE = 3


class StoreWriteFailed(ResourceLimitExceeded):
    """A write the store could not make (disk full, I/O error): the operation that needed
    it is refused and nothing of it is kept; the broker carries on."""


def classify(exc: BaseException, path: Path) -> str | None:
    """SPACE, IO or UNUSABLE for a failed write to the store at ``path``; None: not a
    storage fault (a bug, a constraint), which the caller lets through."""
    if isinstance(exc, OSError):
        return SPACE if exc.errno in _SPACE_ERRNOS else (IO if path.exists() else UNUSABLE)
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    text = str(exc)
    if primary == _SQLITE_FULL or "database or disk is full" in text:
        return SPACE
    if not path.exists() or primary in _GONE or "malformed" in text \
            or "not a database" in text or "readonly" in text:
        return UNUSABLE
    if primary == _SQLITE_IOERR or "disk I/O error" in text:
        return IO
    return None


def describe(kind: str, exc: BaseException, path: Path) -> str:
    """The refusal a client reads: the cause, where, what was not done, what helps."""
    where = path.parent
    if kind == SPACE:
        return (f"the broker's store is full (disk full at {where}): message not stored; "
                "free space on that disk or raise the store limit, then send again")
    if kind == IO:
        return (f"the broker's store could not write (I/O error at {where}: {exc}): message "
                "not stored; check the disk, then send again")
    return (f"the broker's store at {path} is unusable ({exc}): the broker stops so that "
            "no client is told a message is kept when it is not; restore the file or the "
            "disk and restart it")


#: The space a store keeps in reserve on its disk (a file of zeros it gives back when the
#: disk fills): at most this much, and at most a quarter of the file system
RESERVE_BYTES = 8 * 1024 * 1024


def free_bytes(directory: Path) -> int:
    """Bytes an unprivileged writer may still use on ``directory``'s file system."""
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


class SpaceReserve:
    """A file of zeros next to the store, given back when the disk fills.

    SQLite in WAL mode cannot even delete on a full disk: a commit appends to the log,
    and the log is reset only by a checkpoint, which copies its pages into the main file
    -- growing it. With both full, nothing, not even an ack, could be written again until
    a person freed space. Deleting the reserve lets that checkpoint finish; acks then
    free pages inside the store, which new messages reuse. The reserve comes back once
    the disk has room for it twice over (and the store takes messages freely again).
    """

    def __init__(self, path: Path, wanted: int) -> None:
        self.path = path
        try:
            st = os.statvfs(path.parent)
            quarter = st.f_blocks * st.f_frsize // 4
        except OSError:
            quarter = wanted
        self.size = max(0, min(wanted, quarter))

    @property
    def held(self) -> bool:
        return self.size > 0 and self.path.exists()

    def ensure(self) -> bool:
        """Hold the reserve (True), unless the disk has no room for it."""
        if self.size == 0 or self.held:
            return self.size > 0
        tmp = self.path.with_name(self.path.name + ".new")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.posix_fallocate(fd, 0, self.size)  # really taken: not a sparse file
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)
            return False
        return True

    def release(self) -> bool:
        """Give the reserve back to the disk; True if there was one."""
        try:
            self.path.unlink()
        except OSError:
            return False
        return True
