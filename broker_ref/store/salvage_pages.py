"""The rows of a damaged SQLite file read straight from its pages, for the salvage.

SQLite finds a row by walking its table's b-tree from the root. When a file is cut short
or overwritten, the pages near the root are often the ones lost: a table's interior pages
are made when it grows, so they sit towards the end of the file, and a file cut in half
then has every leaf of its first half intact and no way to reach any of them (SQLite
reports "database disk image is malformed" for every row). The leaves themselves are
self-describing -- each cell is a row id and a record -- so this module reads every page
that is a table leaf, the way SQLite's own ``.recover`` does, and returns the rows it
finds. Pages on the file's free list are skipped: they hold rows already deleted (an
acknowledged message must not come back). The caller decides which rows are the store's.

Everything here is bounds-checked: a page of random bytes yields nothing, not an error.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path

__all__ = ["table_rows"]

_LEAF_TABLE = 0x0D
#: a record with more columns than this is not one of the store's rows
_MAX_COLUMNS = 64


def table_rows(path: Path) -> Iterator[tuple[int, list[object]]]:
    """(row id, column values) of every well-formed cell on the table-leaf pages of the
    file at ``path`` that are not on its free list, in page order. The file is mapped,
    not read: a store of many GB is scanned in the memory of its pages in use."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size < 512:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield from _rows(data)


def _rows(data: mmap.mmap) -> Iterator[tuple[int, list[object]]]:
    if data[:16] != b"SQLite format 3\0":
        return
    page_size = int.from_bytes(data[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return
    usable = page_size - data[20]
    pages = len(data) // page_size
    free = _free_pages(data, page_size, pages)
    for pgno in range(1, pages + 1):
        if pgno in free:
            continue
        start = (pgno - 1) * page_size
        head = start + (100 if pgno == 1 else 0)
        if data[head] != _LEAF_TABLE:
            continue
        yield from _leaf_cells(data, start, head, page_size, usable, pages)


def _free_pages(data: mmap.mmap, page_size: int, pages: int) -> set[int]:
    """The pages the header's free list names (trunks and leaves), as far as it reads."""
    free: set[int] = set()
    trunk = int.from_bytes(data[32:36], "big")
    while 0 < trunk <= pages and trunk not in free:
        free.add(trunk)
        at = (trunk - 1) * page_size
        count = int.from_bytes(data[at + 4:at + 8], "big")
        if count > (page_size - 8) // 4:
            break
        for i in range(count):
            leaf = int.from_bytes(data[at + 8 + 4 * i:at + 12 + 4 * i], "big")
            if 0 < leaf <= pages:
                free.add(leaf)
        trunk = int.from_bytes(data[at:at + 4], "big")
    return free


def _leaf_cells(data: mmap.mmap, start: int, head: int, page_size: int, usable: int,
                pages: int) -> Iterator[tuple[int, list[object]]]:
    end = start + page_size
    cells = int.from_bytes(data[head + 3:head + 5], "big")
    pointers = head + 8
    if pointers + 2 * cells > end:
        return
    for i in range(cells):
        offset = int.from_bytes(data[pointers + 2 * i:pointers + 2 * i + 2], "big")
        try:
            cell = _cell(data, start + offset, end, usable, page_size, pages)
        except (ValueError, IndexError, UnicodeDecodeError, struct.error):
            continue
        if cell is not None:
            yield cell


def _varint(data: bytes | mmap.mmap, at: int, end: int) -> tuple[int, int]:
    value = 0
    for i in range(9):
        if at + i >= end:
            raise ValueError("varint past the page")
        byte = data[at + i]
        if i == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    raise AssertionError("unreachable")


def _cell(data: mmap.mmap, at: int, end: int, usable: int, page_size: int,
          pages: int) -> tuple[int, list[object]] | None:
    size, at = _varint(data, at, end)
    rowid, at = _varint(data, at, end)
    if rowid >= 1 << 63:
        rowid -= 1 << 64
    most_local = usable - 35
    if size <= most_local:
        local = size
    else:  # SQLite's rule for how much of a big payload stays on the leaf
        least = (usable - 12) * 32 // 255 - 23
        local = least + (size - least) % (usable - 4)
        if local > most_local:
            local = least
    if at + local > end:
        return None
    payload = bytearray(data[at:at + local])
    if local < size:
        if at + local + 4 > end:
            return None
        page = int.from_bytes(data[at + local:at + local + 4], "big")
        seen: set[int] = set()
        while len(payload) < size:
            if not 0 < page <= pages or page in seen:
                return None  # the chain leads off the file: the row is not whole
            seen.add(page)
            base = (page - 1) * page_size
            page = int.from_bytes(data[base:base + 4], "big")
            payload += data[base + 4:base + min(usable, 4 + size - len(payload))]
    values = _record(bytes(payload))
    return None if values is None else (rowid, values)


def _record(payload: bytes) -> list[object] | None:
    """The column values of one record (SQLite's record format), or None if malformed."""
    end = len(payload)
    header, at = _varint(payload, 0, end)
    if header > end or header < at:
        return None
    types: list[int] = []
    while at < header:
        serial, at = _varint(payload, at, header)
        types.append(serial)
        if len(types) > _MAX_COLUMNS:
            return None
    if at != header:
        return None
    values: list[object] = []
    at = header
    for serial in types:
        if serial == 0:
            values.append(None)
        elif serial <= 6:
            width = (0, 1, 2, 3, 4, 6, 8)[serial]
            if at + width > end:
                return None
            values.append(int.from_bytes(payload[at:at + width], "big", signed=True))
            at += width
        elif serial == 7:
            if at + 8 > end:
                return None
            values.append(struct.unpack(">d", payload[at:at + 8])[0])
            at += 8
        elif serial in (8, 9):
            values.append(serial - 8)
        elif serial in (10, 11):
            return None
        else:
            width = (serial - 12) // 2
            if at + width > end:
                return None
            raw = payload[at:at + width]
            values.append(raw if serial % 2 == 0 else raw.decode("utf-8"))
            at += width
    return values if at == end else None
