"""SqliteStore's own promises: group commit, atomic batches, rows read back exactly,
damage that costs only the damaged rows, clear errors for unusable paths, and what was
committed surviving a kill -9 of the writing process."""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from core_support import rows_on_disk

from jmspy.broker_ref.core import BodyType, DestinationKind, ServerMessage
from jmspy.broker_ref.store.message_codec import CodecError, decode_message, encode_message
from jmspy.broker_ref.store.sqlite_store import SqliteStore, StoreError


def m(mid: str, body: str = "x", **kw: Any) -> ServerMessage:
    return ServerMessage(mid, DestinationKind.QUEUE, "q", BodyType.TEXT, body, **kw)


def test_group_commit_holds_every_write_until_one_commit(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite", group_commit=True)
    for i in range(5):
        store.add_message("q", m(f"m{i}"))
    with store.batch():
        store.remove_message("q", "m0")
    assert store.pending
    assert rows_on_disk(store.path) == []  # nothing durable yet: no RECEIPT may leave
    store.commit()
    assert not store.pending
    assert rows_on_disk(store.path) == ["m1", "m2", "m3", "m4"]


def test_without_group_commit_each_write_is_durable_when_it_returns(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite")
    store.add_message("q", m("a"))
    assert rows_on_disk(store.path) == ["a"]
    with store.batch():
        store.add_message("q", m("b"))
        store.add_message("q", m("c"))
        assert rows_on_disk(store.path) == ["a"]  # a batch is one atomic unit
    assert rows_on_disk(store.path) == ["a", "b", "c"]


def test_a_failed_batch_leaves_nothing_of_itself_and_keeps_the_others_writes(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "s.sqlite", group_commit=True)
    store.add_message("q", m("kept"))  # another connection's write, same transaction
    with pytest.raises(RuntimeError), store.batch():
        store.add_message("q", m("half"))
        raise RuntimeError("the broker operation failed half-way")
    store.commit()
    assert store.message_ids("q") == ["kept"]


def test_every_field_and_body_kind_reads_back_exactly(tmp_path: Path) -> None:
    messages = [
        m("t", "text é", properties={"b": True, "i": -2**63, "f": 1.5, "s": "x", "n": None},
          priority=9, timestamp=123, expiration=456, deliver_at=789, correlation_id="c",
          reply_to=(DestinationKind.TOPIC, "replies"), jms_type="T", size=42, persistent=True),
        ServerMessage("b", DestinationKind.QUEUE, "q", BodyType.BYTES, b"\x00\xff{$b}"),
        ServerMessage("m", DestinationKind.QUEUE, "q", BodyType.MAP,
                      {"raw": b"\x01", "n": 3, "$b": "looks tagged", "none": None,
                       "f": math.inf}),
        ServerMessage("e", DestinationKind.TOPIC, "t.x"),
    ]
    store = SqliteStore(tmp_path / "s.sqlite")
    for msg in messages:
        store.add_message(msg.destination, msg)
    store.update_delivery_count("q", "b", 3)
    reopened = SqliteStore(tmp_path / "s.sqlite")
    q, tx = reopened.read_queue("q"), reopened.read_queue("t.x")
    assert [s.message for s in q] == messages[:3]
    assert [s.message for s in tx] == messages[3:]
    assert [s.delivery_count for s in q] == [0, 3, 0]


def test_a_damaged_row_is_dropped_and_named_and_the_rest_recovered(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path)
    for mid in ("a", "b", "c"):
        store.add_message("q", m(mid))
    store.close()
    db = sqlite3.connect(str(path))
    db.execute("UPDATE messages SET data = ? WHERE id = 'b'", (b"{torn",))
    db.commit()
    db.close()
    reopened = SqliteStore(path)
    assert [s.message.message_id for s in reopened.read_queue("q")] == ["a", "c"]
    assert [(q, mid) for q, mid, _ in reopened.dropped] == [("q", "b")]
    assert "cannot be read" in reopened.dropped[0][2]


def test_a_row_from_a_newer_format_is_refused_naming_the_upgrade() -> None:
    data = encode_message(m("a")).replace(b'"v":1', b'"v":99')
    with pytest.raises(CodecError, match=r"newer than this jmspy reads.*upgrade jmspy"):
        decode_message(data)


def test_a_data_path_that_is_not_usable_is_a_clear_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(StoreError, match=r"cannot open the message store .*file/s\.sqlite"):
        SqliteStore(not_a_dir / "s.sqlite")



def test_a_file_that_is_not_a_store_is_moved_aside_and_the_broker_starts_empty(
        tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    store = SqliteStore(garbage)
    assert store.salvaged is not None and store.salvaged.kept == 0
    assert store.salvaged.damaged.read_bytes() == b"this is not a database" * 100
    assert "not a database" in store.salvaged.describe()
    assert store.read_queue("q") == []


_WRITER = textwrap.dedent("""
    import sys
    from jmspy.broker_ref.core import BodyType, DestinationKind, ServerMessage
    from jmspy.broker_ref.store.sqlite_store import SqliteStore
    store = SqliteStore(sys.argv[1], group_commit=True)
    i = 0
    while True:
        for _ in range(7):
            store.add_message("q", ServerMessage(
                f"m{i}", DestinationKind.QUEUE, "q", BodyType.TEXT, "x" * 200))
            i += 1
        store.commit()
        print(f"m{i - 1}", flush=True)  # the RECEIPT: only after the commit returned
""")


def test_what_was_committed_survives_kill_9_of_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    confirmed = [proc.stdout.readline().strip() for _ in range(50)]
    os.kill(proc.pid, signal.SIGKILL)  # mid-stream: commits in flight, WAL unsynced tail
    proc.wait()
    proc.stdout.close()
    ids = {s.message.message_id for s in SqliteStore(path).read_queue("q")}
    last = int(confirmed[-1][1:])
    assert all(f"m{i}" in ids for i in range(last + 1))  # nothing confirmed is lost


def test_a_store_of_the_first_layout_is_upgraded_and_read(tmp_path: Path) -> None:
    from jmspy.broker_ref.store.message_codec import encode_message
    from jmspy.broker_ref.store.sqlite_store import SCHEMA_VERSION

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(str(path))
    db.execute("CREATE TABLE messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT "
               "NULL, id TEXT NOT NULL, delivery_count INTEGER NOT NULL DEFAULT 0, data BLOB "
               "NOT NULL, UNIQUE (queue, id))")
    old = [ServerMessage(f"o{i}", DestinationKind.QUEUE, "q", BodyType.TEXT, f"old {i}",
                         priority=i * 3) for i in range(3)]
    for i, msg in enumerate(old):
        db.execute("INSERT INTO messages (queue, id, delivery_count, data) VALUES (?, ?, ?, ?)",
                   ("q", msg.message_id, i, encode_message(msg)))
    db.commit()
    db.close()
    store = SqliteStore(path)
    new = ServerMessage("n", DestinationKind.QUEUE, "q", BodyType.BYTES, b"\x00new",
                        properties={"k": 1})
    store.add_message("q", new)
    assert [(s.message, s.delivery_count) for s in store.read_queue("q")] == [
        *[(msg, i) for i, msg in enumerate(old)], (new, 0)]
    runs = store.load().runs["q"]  # the levels were read out of the old rows
    assert sorted((r.level, r.count) for r in runs) == [(3, 1), (5, 1), (6, 1), (9, 1)]
    assert store.page_in("q", 3, 0, 10**9, 5)[0][1].message == old[2]  # type: ignore[union-attr]
    (version,) = sqlite3.connect(str(path)).execute("PRAGMA user_version").fetchone()
    assert version == SCHEMA_VERSION


def test_a_truncated_store_is_salvaged_keeping_what_is_intact(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path, group_commit=True)
    for i in range(3000):
        store.add_message("q", m(f"m{i:05}", body="y" * 300))
    store.close()  # checkpoints: every row is in the main file now
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 2)  # a bad copy, a full disk: the tail of the file is gone
    reopened = SqliteStore(path)
    report = reopened.salvaged
    assert report is not None and report.damaged.exists()
    kept = [s.message.message_id for s in reopened.read_queue("q")]
    assert 0 < len(kept) < 3000 and report.kept == len(kept)
    assert kept == sorted(kept)  # what survived is in order, nothing invented
    assert str(report.damaged) in report.describe()
    reopened.add_message("q", m("after"))  # the store works again
    assert reopened.read_queue("q")[-1].message.message_id == "after"


def test_check_reports_a_damaged_file_and_leaves_it_alone(tmp_path: Path) -> None:
    from jmspy.broker_ref.data_dir import STORE_FILE, check

    (tmp_path / STORE_FILE).write_bytes(b"this is not a database" * 100)
    code, lines = check(tmp_path)
    assert code == 1 and STORE_FILE in lines[0]
    assert "DAMAGED FILE: file is not a database" in lines[1]
    assert "moves it aside as messages.sqlite.damaged-<UTC time>" in lines[1]
    assert "0 messages recovered" in lines[1]
    assert (tmp_path / STORE_FILE).read_bytes() == b"this is not a database" * 100
    assert not list(tmp_path.glob("*.damaged-*"))  # a check changes nothing
