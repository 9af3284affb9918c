"""Rows read from a SQLite file's pages without its b-tree (the salvage of a store whose
interior pages are lost): every live row, whole, and nothing SQLite gave up."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from jmspy.broker_ref.store.salvage_pages import table_rows


def _db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(str(path))
    db.execute("PRAGMA secure_delete = OFF")  # freed pages keep their old cells
    return db


def test_rows_on_free_list_pages_are_not_read(tmp_path: Path) -> None:
    """A dropped table's leaves go to the free list with their cells still in them (no
    secure delete): they are deleted rows, and must not come back."""
    path = tmp_path / "t.sqlite"
    db = _db(path)
    db.execute("CREATE TABLE gone (seq INTEGER PRIMARY KEY, body TEXT)")
    db.execute("CREATE TABLE kept (seq INTEGER PRIMARY KEY, body TEXT)")
    db.executemany("INSERT INTO gone (body) VALUES (?)", [(f"gone{i}" * 100,) for i in range(300)])
    db.executemany("INSERT INTO kept (body) VALUES (?)", [(f"kept{i}" * 100,) for i in range(300)])
    db.commit()
    db.execute("DROP TABLE gone")
    db.commit()
    assert db.execute("PRAGMA freelist_count").fetchone()[0] > 0
    db.close()
    bodies = [values[1] for _, values in table_rows(path) if len(values) == 2]
    assert sorted(bodies) == sorted(f"kept{i}" * 100 for i in range(300))


def test_a_row_longer_than_a_page_is_read_whole_from_its_overflow_pages(
        tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    db = _db(path)
    db.execute("CREATE TABLE m (seq INTEGER PRIMARY KEY, queue TEXT, body BLOB)")
    big = os.urandom(100_000)
    db.execute("INSERT INTO m (queue, body) VALUES ('q', ?)", (big,))
    db.execute("INSERT INTO m (queue, body) VALUES ('q', x'00')")
    db.commit()
    db.close()
    rows = {rowid: values for rowid, values in table_rows(path) if len(values) == 3}
    assert rows == {1: [None, "q", big], 2: [None, "q", b"\0"]}


def test_pages_of_garbage_yield_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    db = _db(path)
    db.execute("CREATE TABLE m (seq INTEGER PRIMARY KEY, body TEXT)")
    db.executemany("INSERT INTO m (body) VALUES (?)", [("x" * 500,) for _ in range(100)])
    db.commit()
    db.close()
    clean = list(table_rows(path))
    data = bytearray(path.read_bytes())
    noise = bytes((i * 37 + 11) % 256 for i in range(4096))
    for page in range(2, len(data) // 4096):  # leaf-like first bytes, then noise
        data[page * 4096:(page + 1) * 4096] = bytes([0x0D]) + noise[1:]
    path.write_bytes(bytes(data))
    assert [row for row in table_rows(path) if row not in clean] == []
