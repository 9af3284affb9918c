"""The operator's actions reach messages paged out to disk (seed 002): a purge empties the
whole backlog, a delete or a move finds a message on disk by id, a dead-letter retry
sends every paged dead letter back -- each counted exactly, on both stores, for stored
(persistent) and spooled (non-persistent) pages, with RAM holding about one batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from core_support import FakeClock, Recorder, msg

from jmspy.broker_ref.core import Broker, DestinationKind, MemoryStore, admin
from jmspy.broker_ref.core.api import ORIGINAL_DESTINATION, AddressSettings
from jmspy.broker_ref.core.consumer import PAGE_OVERHEAD
from jmspy.broker_ref.core.errors import InvalidDestination
from jmspy.broker_ref.core.paging import PAGE_BATCH
from jmspy.broker_ref.core.queue_paging import QueuePaging
from jmspy.broker_ref.store.sqlite_store import SqliteStore

Q = DestinationKind.QUEUE
COST = 164 + PAGE_OVERHEAD
#: a RAM budget of 50 test messages (70 % of the memory limit is the paging high water)
LIMIT = 50 * COST * 100 // 70 + 1
N = 3 * PAGE_BATCH


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "m.sqlite")


@pytest.fixture(params=[True, False], ids=["stored", "spooled"])
def persistent(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _broker(store: Any, clock: FakeClock, tmp_path: Path) -> Broker:
    # one queue may take the whole budget, and non-persistent messages page to the spool
    # instead of holding their producer (as in test_paging.py)
    return Broker(store=store, clock=clock, memory_limit=LIMIT, spool_dir=tmp_path / "temp",
                  default_settings=AddressSettings(producer_flow_control=False),
                  destination_memory_percent=100)


def _fill(b: Broker, queue: str, n: int, persistent: bool, **kw: Any) -> list[Any]:
    conn = b.connect(Recorder())
    sent = [msg(queue, str(i), size=164, persistent=persistent, **kw) for i in range(n)]
    for m in sent:
        conn.send(m)
    assert b.stats(queue).paged_count >= n - 50  # all but what RAM holds is on disk
    return sent


def _drain(b: Broker, queue: str) -> list[str]:
    rec = Recorder()
    conn = b.connect(rec)
    conn.create_consumer(99, Q, queue, credit=200)
    got: list[str] = []
    while batch := rec.take():
        got += [d.message.body for d in batch]
        conn.ack([d.delivery_tag for d in batch])
        conn.grant_credit(99, len(batch))
    return got


def test_purge_deletes_the_paged_backlog_too(store: Any, clock: FakeClock, tmp_path: Path,
                                             persistent: bool) -> None:
    b = _broker(store, clock, tmp_path)
    _fill(b, "q", N, persistent)
    result = admin.purge(b, "q")
    assert (result.removed, result.paged_left) == (N, 0)
    stats = b.stats("q")
    assert (stats.message_count, stats.paged_count) == (0, 0)
    assert b.budget.used == 0
    if persistent:
        assert store.stored_counts() == {}  # every row went with its message
    b.connect(Recorder()).send(msg("q", "after", size=164, persistent=persistent))
    assert _drain(b, "q") == ["after"]  # the queue goes on, nothing left of the purge


def test_delete_finds_a_paged_message_by_id_and_leaves_the_order(
        store: Any, clock: FakeClock, tmp_path: Path, persistent: bool) -> None:
    b = _broker(store, clock, tmp_path)
    sent = _fill(b, "q", N, persistent)
    deep = sent[N - 10]  # far past what RAM holds
    removed = admin.remove_message(b, "q", deep.message_id)
    assert removed.body == deep.body
    assert b.stats("q").message_count == N - 1
    with pytest.raises(admin.MessageNotFound, match="browse the queue"):
        admin.remove_message(b, "q", deep.message_id)
    assert _drain(b, "q") == [str(i) for i in range(N) if i != N - 10]
    if persistent:
        assert store.stored_counts() == {}


def test_move_takes_a_paged_message_to_another_queue(
        store: Any, clock: FakeClock, tmp_path: Path, persistent: bool) -> None:
    b = _broker(store, clock, tmp_path)
    b.connect(Recorder()).send(msg("b", "first", size=164, persistent=persistent))
    sent = _fill(b, "a", N, persistent)
    admin.move_message(b, "a", sent[-1].message_id, "b")
    assert b.stats("a").message_count == N - 1
    assert _drain(b, "b") == ["first", str(N - 1)]
    assert _drain(b, "a") == [str(i) for i in range(N - 1)]


def test_a_move_that_cannot_be_routed_leaves_the_paged_message_on_disk(
        store: Any, clock: FakeClock, tmp_path: Path) -> None:
    b = _broker(store, clock, tmp_path)
    sent = _fill(b, "a", N, True)
    with pytest.raises(InvalidDestination, match="wildcard"):
        admin.move_message(b, "a", sent[-1].message_id, "orders.*", DestinationKind.TOPIC)
    assert b.stats("a").message_count == N
    assert _drain(b, "a") == [str(i) for i in range(N)]


def test_retry_sends_every_paged_dead_letter_back(
        store: Any, clock: FakeClock, tmp_path: Path, persistent: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    b = _broker(store, clock, tmp_path)
    origin = {ORIGINAL_DESTINATION: "jobs"}
    _fill(b, "DLQ", N, persistent, properties=origin)
    held: list[int] = []  # what the DLQ holds in RAM each time the next batch is read
    bring_next = QueuePaging.bring_next

    def counting(self: QueuePaging, want: int = PAGE_BATCH) -> bool:
        held.append(b.stats("DLQ").in_memory_count)
        return bring_next(self, want)

    monkeypatch.setattr(QueuePaging, "bring_next", counting)
    result = admin.retry_dead_letters(b, "DLQ")
    peak = max(held)
    assert len(result.moved) == N and result.skipped == []
    assert b.stats("DLQ").message_count == 0
    assert b.stats("jobs").message_count == N
    assert _drain(b, "jobs") == [str(i) for i in range(N)]
    assert len(held) >= N // PAGE_BATCH and peak == 0  # each batch gone before the next


def test_retry_meets_a_dead_letter_without_an_origin_once(
        store: Any, clock: FakeClock, tmp_path: Path) -> None:
    b = _broker(store, clock, tmp_path)
    conn = b.connect(Recorder())
    orphan = msg("DLQ", "orphan", size=164, persistent=True)
    conn.send(orphan)
    for i in range(N):
        conn.send(msg("DLQ", str(i), size=164, persistent=True,
                      properties={ORIGINAL_DESTINATION: "jobs"}))
    result = admin.retry_dead_letters(b, "DLQ")
    assert result.skipped == [orphan.message_id]
    assert len(result.moved) == N
    assert _drain(b, "DLQ") == ["orphan"]
