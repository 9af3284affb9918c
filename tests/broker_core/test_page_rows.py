"""The drain's narrow page-in (``page_rows``, ``SqliteStore.take_page``): every message
the narrow read carries is exactly what the full read (``from_row``) makes of the same
row. Rows the narrow read
cannot carry -- rare fields, older layouts, damaged values -- come back through the full
read, in their place, or are dropped as they always were."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

import jmspy.broker_ref.store.page_rows as page_rows
from jmspy.broker_ref.core import BodyType, DestinationKind, ServerMessage
from jmspy.broker_ref.core.records import priority_level
from jmspy.broker_ref.store.message_codec import encode_message
from jmspy.broker_ref.store.sqlite_store import _PAGE, _TAKE, SqliteStore
from jmspy.broker_ref.store.store import MemoryStore, paged_rows

_texts = st.text(max_size=8)
_values = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                    st.floats(allow_nan=False), _texts)
_bodies = {
    BodyType.MESSAGE: st.none(),
    BodyType.TEXT: st.one_of(st.none(), _texts),
    BodyType.BYTES: st.one_of(st.none(), st.binary(max_size=16)),
    BodyType.MAP: st.one_of(st.none(), st.dictionaries(
        _texts, st.one_of(_values, st.binary(max_size=8)), max_size=3)),
}
_kinds = st.sampled_from(DestinationKind)


@st.composite
def messages(draw: st.DrawFn) -> tuple[ServerMessage, int]:
    """A message (rare fields now and then) and a stored delivery count."""
    body_type = draw(st.sampled_from(BodyType))
    rare = st.integers(0, 3).map(lambda x: x == 0)  # a quarter of the rows set each one
    message = ServerMessage(
        draw(_texts), draw(_kinds), draw(_texts), body_type, draw(_bodies[body_type]),
        draw(st.dictionaries(_texts, _values, max_size=3)), draw(st.booleans()),
        draw(st.integers(-2, 12)), draw(st.integers(0, 2**45)),
        draw(st.integers(1, 2**45)) if draw(rare) else 0,
        draw(st.integers(1, 2**45)) if draw(rare) else 0,
        draw(_texts) if draw(rare) else None,
        (draw(_kinds), draw(_texts)) if draw(rare) else None,
        draw(_texts) if draw(rare) else None, 0, draw(st.integers(0, 2**40)))
    return message, draw(st.one_of(st.integers(0, 5), st.integers(-3, 2**40)))


def _store(tmp: Path, rows: list[tuple[ServerMessage, int]]) -> SqliteStore:
    store = SqliteStore(tmp / "s.sqlite", group_commit=True)
    for i, (message, count) in enumerate(rows):
        message.message_id = f"{i}:{message.message_id}"  # unique within the queue
        store.add_message("q", message)
        store.update_delivery_count("q", message.message_id, count)
    store.commit()
    return store


def _levels(store: SqliteStore) -> list[int]:
    return [run.level for run in store.load().runs.get("q", [])]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(messages(), max_size=12), recovered=st.booleans())
def test_the_narrow_read_makes_what_the_full_read_makes(
        tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[ServerMessage, int]],
        recovered: bool) -> None:
    store = _store(tmp_path_factory.mktemp("rows"), rows)
    for level in _levels(store):
        params = ("q", level, 0, 2**62, 100)
        narrow = store._db.execute(_TAKE[False], params).fetchall()
        full = store.decode_rows("q", store._db.execute(_PAGE, params).fetchall())
        want, _, _ = paged_rows(full, level, recovered)
        assert len(want) == len(narrow)  # every row written by add_message is readable
        got_p, wide_p = page_rows.narrow_paged(narrow, level, recovered)
        assert [i for i, p in enumerate(got_p) if p is None] == wide_p
        for i, paged in enumerate(got_p):  # what the narrow read carries is the full read's
            if paged is not None:
                assert paged == want[i]
                assert type(paged[0].priority) is int and type(paged[0].persistent) is bool
        # rare fields and old layouts only: a plain row always takes the narrow read
        for i in wide_p:
            m = want[i][0]
            assert (m.expiration or m.deliver_at or m.correlation_id is not None
                    or m.reply_to is not None or m.jms_type is not None
                    or not -2**31 < want[i][1] < 2**31 or narrow[i][7] is None)
        assert store.take_page("q", level, 0, 2**62, 100, False, recovered) == (
            want, len(full), full[-1][0])
    store.close()


def _raw(db: sqlite3.Connection, mid: str, **cols: Any) -> None:
    row: dict[str, Any] = {"queue": "q", "id": mid, "delivery_count": 0, "data": b"",
                           "level": 5, "kind": "queue", "dest": "q", "body_type": "text",
                           "body": "b", "props": None, "persistent": 1, "priority": 4,
                           "ts": 7, "exp": 0, "at": 0, "size": 9}
    row.update(cols)
    db.execute(f"INSERT INTO messages ({', '.join(row)}) VALUES "
               f"({', '.join('?' * len(row))})", tuple(row.values()))


def test_damaged_and_older_rows_in_a_batch_take_the_full_read_in_place(
        tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    SqliteStore(path).close()
    db = sqlite3.connect(str(path))
    old = ServerMessage("old", DestinationKind.QUEUE, "q", BodyType.TEXT, "json", priority=4)
    _raw(db, "a")
    _raw(db, "bad-props", props="{not json")
    _raw(db, "old", data=encode_message(old), kind=None, dest=None, body_type=None,
         body=None, persistent=None, priority=None, ts=None, exp=None, at=None, size=None)
    _raw(db, "bad-kind", kind="nowhere")
    _raw(db, "ttl", exp=99)
    _raw(db, "map", body_type="map", body=json.dumps({"k": {"$b": "AAE="}}))
    _raw(db, "z", delivery_count=3)
    db.commit()
    db.close()
    store = SqliteStore(path)
    paged, read, last = store.take_page("q", 5, 0, 10**9, 100, True, recovered=True)
    assert read == 7 and last == 7
    assert [(m.message_id, count) for m, count, _ in paged] == [
        ("a", 1), ("old", 1), ("ttl", 1), ("map", 1), ("z", 3)]
    assert paged[1][0] == old
    assert paged[2][0].expiration == 99
    assert paged[3][0].body == {"k": b"\x00\x01"}
    assert sorted(mid for _, mid, _ in store.dropped) == ["bad-kind", "bad-props"]
    assert paged == paged_rows(store.page_in("q", 5, 0, 10**9, 100), 5, True)[0]


def test_a_queue_of_rare_rows_reads_them_whole_until_plain_ones_come_back(
        tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite", group_commit=True)
    sent = [ServerMessage(f"m{i}", DestinationKind.QUEUE, "q", BodyType.TEXT, f"{i}",
                          correlation_id="c" if 100 <= i < 300 else None) for i in range(500)]
    for message in sent:
        store.add_message("q", message)
    store.commit()
    level = priority_level(4)
    got: list[ServerMessage] = []
    wide: list[bool] = []
    first = 0
    while True:
        paged, read, last = store.take_page("q", level, first, 10**9, 50, True)
        if not read:
            break
        got += [m for m, _, _ in paged]
        wide.append("q" in store._wide)  # what the next batch reads
        first = last + 1
    assert got == sent
    # rows 100-299 carry a correlation id: the batch that meets them reads them again
    # whole and the next ones read whole at once; the first whole read of plain rows
    # (300-349) goes back to the narrow read
    assert wide == [False, False, True, True, True, True, False, False, False, False]


def test_the_memory_store_takes_a_page_as_it_pages_in() -> None:
    store = MemoryStore()
    for i in range(5):
        store.add_message("q", ServerMessage(f"m{i}", DestinationKind.QUEUE, "q",
                                             BodyType.TEXT, f"{i}"))
    store.update_delivery_count("q", "m1", 4)
    paged, read, last = store.take_page("q", 5, 2, 10**9, 3, recovered=True)
    assert [(m.message_id, c, level) for m, c, level in paged] == [
        ("m1", 4, 5), ("m2", 1, 5), ("m3", 1, 5)]
    assert (read, last) == (3, 4)
