"""A store damaged from outside is salvaged when the broker starts, never silenced: the
damaged file is moved aside (with a UTC time in its name), every readable message is
delivered after the restart, and the log and the broker's stats say how many rows were
recovered and how many lost. Three real damages of a store holding 2,000 messages: 16 KiB
overwritten in the middle, the file cut to half, its header zeroed."""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from stomp_pair import StompPair

from jmspy.broker_ref.core import BodyType, DestinationKind, ServerMessage
from jmspy.broker_ref.protocols.stomp.client import format_usage
from jmspy.broker_ref.store.sqlite_store import SqliteStore
from jmspy.stomp_frames import header_dict

STORED = 2000
_DAMAGED_NAME = re.compile(r"messages\.sqlite\.damaged-\d{8}T\d{6}Z$")


def fill(path: Path, body_size: int = 300, acked: int = 0, count: int = STORED) -> list[str]:
    """A closed store of ``count`` persistent messages on queue ``orders`` (ids in
    order); the first ``acked`` of them then acknowledged (their rows deleted)."""
    store = SqliteStore(path, group_commit=True)
    ids = [f"m{i:05}" for i in range(count)]
    for mid in ids:
        store.add_message("orders", ServerMessage(mid, DestinationKind.QUEUE, "orders",
                                                  BodyType.TEXT, "y" * body_size,
                                                  persistent=True))
    for mid in ids[:acked]:
        store.remove_message("orders", mid)
    store.close()  # checkpoints: every row is in the main file
    return ids


def overwrite_middle(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(size // 2)
        f.write(bytes(range(256)) * 64)  # 16 KiB of garbage over four pages


def cut_to_half(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)


def zero_header(path: Path) -> None:
    with open(path, "r+b") as f:
        f.write(bytes(100))


DAMAGES: dict[str, Callable[[Path], None]] = {
    "overwritten": overwrite_middle, "truncated": cut_to_half, "header": zero_header}


def delivered(store: SqliteStore) -> list[str]:
    return start(store)[0]


def start(store: SqliteStore) -> tuple[list[str], dict[str, object]]:
    """Start a broker core on ``store``: the ids it delivers on ``orders`` (all of them:
    ack:auto windows refill), and its usage stats."""
    pair = StompPair(store=store)
    usage = dict(pair.broker.usage())
    client = pair.client()
    client.subscribe("/queue/orders", "s", ack="auto")
    got = [header_dict(m.headers)["message-id"] for m in client.messages]
    client.close()
    pair.broker.close()
    return got, usage


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_store_is_moved_aside_and_every_readable_row_delivered(
        tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "messages.sqlite"
    ids = fill(path)
    DAMAGES[damage](path)
    damaged_bytes = path.read_bytes()
    with caplog.at_level(logging.WARNING, "jmspy.broker.store"):
        store = SqliteStore(path, group_commit=True)
    report = store.salvaged
    assert report is not None
    assert _DAMAGED_NAME.search(report.damaged.name)
    assert report.damaged.read_bytes() == damaged_bytes  # kept as it was, for a person
    got, usage = start(store)
    assert len(got) == report.kept > 0
    assert got == [i for i in ids if i in set(got)]  # in order, nothing invented
    assert report.kept + report.lost == STORED
    if damage != "truncated":  # the indexes still list every row: lost is exact
        assert report.lost_exact
    assert damage != "header" or report.kept == STORED  # only the header was lost
    assert damage != "overwritten" or report.kept >= STORED * 9 // 10
    # the log and the stats say it, with the same numbers
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert f"recovered {report.kept:,} messages" in logged and f"lost {report.lost:,}" in logged
    assert usage["salvageRecovered"] == report.kept and usage["salvageLost"] == report.lost
    assert usage["salvageDamagedFile"] == str(report.damaged)
    line = format_usage({k: str(v) for k, v in usage.items() if v is not None})
    assert f"{report.kept} messages recovered, {report.lost} lost" in line


def test_a_store_cut_to_half_keeps_the_rows_of_its_intact_half(tmp_path: Path) -> None:
    """With 1 KB messages the table's interior pages, made as it grew, lie in the second
    half of the file: cut there, SQLite reaches no row at all (every lookup reads
    "malformed"), though the leaves of the first half are intact. The salvage reads them
    from the pages themselves."""
    path = tmp_path / "messages.sqlite"
    ids = fill(path, body_size=1000)
    cut_to_half(path)
    store = SqliteStore(path, group_commit=True)
    report = store.salvaged
    assert report is not None
    got = delivered(store)
    assert len(got) == report.kept >= STORED * 4 // 10
    assert got == ids[:len(got)]  # the first half's rows, in order, none invented
    assert report.kept + report.lost >= STORED - 10  # the lost count is an upper bound


def test_rows_read_from_pages_never_bring_back_acknowledged_messages(
        tmp_path: Path) -> None:
    """Acknowledged messages are deleted rows: out of their leaves' cells, or on pages
    given back to the free list. Read page by page, a store cut to half holds only
    messages never acknowledged."""
    path = tmp_path / "messages.sqlite"
    ids = fill(path, body_size=1000, acked=STORED // 4)
    cut_to_half(path)
    store = SqliteStore(path, group_commit=True)
    assert store.salvaged is not None
    got = delivered(store)
    assert got and set(got) <= set(ids[STORED // 4:])
    assert got == sorted(got)


def test_the_salvage_does_not_read_the_whole_file_into_memory(tmp_path: Path) -> None:
    """A store may be many GB: its readable copy is patched in place and its pages are
    mapped, not read into Python objects (which took twice the file's size)."""
    path = tmp_path / "messages.sqlite"
    fill(path, body_size=1000, count=20_000)  # a 25 MB file
    cut_to_half(path)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        store = SqliteStore(path, group_commit=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert store.salvaged is not None and store.salvaged.kept > 20_000 // 4
    store.close()
    assert peak < size // 2, f"{peak:,} bytes at the peak for a {size:,}-byte file"


def test_the_salvaged_store_is_whole_and_a_second_restart_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "messages.sqlite"
    fill(path)
    overwrite_middle(path)
    first = SqliteStore(path)
    assert first.salvaged is not None
    kept = first.salvaged.kept
    first.close()
    assert [r[0] for r in sqlite3.connect(str(path)).execute("PRAGMA integrity_check")] == [
        "ok"]
    again = SqliteStore(path)
    assert again.salvaged is None  # healthy now: nothing moved aside a second time
    assert len(delivered(again)) == kept
    assert len(list(tmp_path.glob("messages.sqlite.damaged-*"))) == 1


def test_a_salvage_interrupted_before_its_swap_is_done_again(tmp_path: Path) -> None:
    """The new file is swapped in only once complete; a crash before that leaves the
    damaged file under the store's name, and the next start salvages it again."""
    path = tmp_path / "messages.sqlite"
    fill(path)
    overwrite_middle(path)
    (tmp_path / "messages.sqlite.salvage").write_bytes(b"half a new store")  # the crash
    store = SqliteStore(path)
    assert store.salvaged is not None and store.salvaged.kept > 0
    assert not (tmp_path / "messages.sqlite.salvage").exists()
    assert len(delivered(store)) == store.salvaged.kept


def test_store_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    from jmspy.broker_ref.data_dir import DataDirectory

    old = os.umask(0)
    try:
        data = DataDirectory(tmp_path / "data")
        store = data.store
        store.add_message("q", ServerMessage("a", DestinationKind.QUEUE, "q",
                                             persistent=True))
        store.commit()
        spool = data.spool_dir
        from jmspy.broker_ref.store.spool import Spool

        s = Spool(spool)
        s.put("q", 4, ServerMessage("b", DestinationKind.QUEUE, "q"), 0)
        modes = {p.name: p.stat().st_mode & 0o777 for p in [data.path, spool,
                                                           *data.path.iterdir(),
                                                           *spool.iterdir()]}
        s.close()
        store.close()
        data.release()
    finally:
        os.umask(old)
    assert modes.pop("data") == 0o700 and modes.pop("temp") == 0o700
    assert {"messages.sqlite", "messages.sqlite-wal", "messages.sqlite-shm", "broker.lock",
            "spool.sqlite"} <= set(modes)
    assert set(modes.values()) == {0o600}, modes


def test_jmspy_stat_over_the_wire_says_what_the_salvage_kept_and_lost(
        tmp_path: Path, server_factory: Callable[..., Any]) -> None:
    from jmspy.broker_ref.protocols.stomp.client import fetch_report

    path = tmp_path / "messages.sqlite"
    fill(path)
    overwrite_middle(path)
    store = SqliteStore(path, group_commit=True)
    report = store.salvaged
    assert report is not None
    server = server_factory(store=store)
    _, usage = fetch_report(server.host, server.port)
    assert (usage["salvageRecovered"], usage["salvageLost"]) == (str(report.kept),
                                                                 str(report.lost))
    assert usage["salvageDamagedFile"] == str(report.damaged)
    assert usage["storeState"] == "ok"
    # SQLite names the damage by where the garbage landed (which pages the file's layout
    # put at its middle): a malformed b-tree or a failed integrity check
    assert report.reason.startswith(("database disk image is malformed",
                                     "integrity check failed")), report.reason
    assert (f"store salvaged at start ({report.reason}): {report.kept} "
            f"messages recovered, {report.lost} lost") in format_usage(usage)
