"""A persistent message stored and taken before the commit is never written: the store
keeps the add of a message for its group commit and drops it when the message is removed
first (an ``ack:auto`` consumer waiting for it), and a transaction whose writes undo each
other is rolled back rather than committed. Either way no log write and no fsync, and
everything that outlives the turn is still committed, and seen by every read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from core_support import Recorder, rows_on_disk

from jmspy.broker_ref.core import BodyType, Broker, DestinationKind, ServerMessage
from jmspy.broker_ref.core.duplicates import DUPLICATE_ID
from jmspy.broker_ref.store.sqlite_store import SqliteStore

Q = DestinationKind.QUEUE


def m(mid: str, queue: str = "q", **kw: Any) -> ServerMessage:
    return ServerMessage(mid, Q, queue, BodyType.TEXT, "x", persistent=True, **kw)


def group_committing(path: Path) -> tuple[SqliteStore, Broker, Recorder, Any]:
    """A broker on a group-committing store at ``path``, and one connection that records."""
    store = SqliteStore(path, group_commit=True)
    broker = Broker(store=store)
    rec = Recorder()
    return store, broker, rec, broker.connect(rec)


def wal_bytes(path: Path) -> int:
    try:
        return os.path.getsize(f"{path}-wal")
    except OSError:
        return 0


def test_a_message_taken_by_an_auto_ack_consumer_in_the_same_turn_writes_nothing(
        tmp_path: Path) -> None:
    store, broker, rec, conn = group_committing(tmp_path / "s.sqlite")
    conn.create_consumer(1, Q, "q", auto_ack=True, credit=1_000)
    conn.send(m("warm-up"))
    store.commit()
    log_before = wal_bytes(store.path)
    for i in range(50):
        conn.send(m(f"m{i}"))
        store.commit()  # the host's commit before the RECEIPT
    assert len(rec.take()) == 51
    assert store.unwritten == 51 and broker.usage()["storeMessagesUnwritten"] == 51
    assert wal_bytes(store.path) == log_before  # no log write: nothing to fsync
    assert rows_on_disk(store.path) == []
    broker.close()


def test_a_message_nobody_took_is_committed_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store, broker, _rec, conn = group_committing(path)
    conn.create_consumer(1, Q, "q", auto_ack=True, credit=1)
    conn.send(m("taken"))
    conn.send(m("kept"))  # the consumer's credit is spent: it stays in the queue
    store.commit()
    assert store.unwritten == 1
    assert rows_on_disk(path) == ["kept"]
    broker.close()


def test_a_client_ack_consumer_gets_its_messages_committed_before_it_can_ack(
        tmp_path: Path) -> None:
    store, broker, rec, conn = group_committing(tmp_path / "s.sqlite")
    conn.create_consumer(1, Q, "q", credit=10)
    conn.send(m("a"))
    store.commit()
    assert rows_on_disk(store.path) == ["a"]  # delivered, not acknowledged: on disk
    conn.ack([d.delivery_tag for d in rec.take()])
    store.commit()
    assert rows_on_disk(store.path) == []
    assert store.unwritten == 0
    broker.close()


def test_a_duplicate_id_of_a_message_taken_at_once_is_still_kept(tmp_path: Path) -> None:
    """The message is gone in the same turn, but its duplicate id must outlive it: a
    resend after a restart is still recognised."""
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path, group_commit=True)
    broker = Broker(store=store)
    conn = broker.connect(Recorder())
    conn.create_consumer(1, Q, "q", auto_ack=True, credit=10)
    conn.send(m("a", properties={DUPLICATE_ID: "order-1"}))
    store.commit()
    assert rows_on_disk(path) == []
    broker.close()
    store, broker, rec, conn = group_committing(path)
    conn.create_consumer(1, Q, "q", auto_ack=True, credit=10)
    conn.send(m("a-again", properties={DUPLICATE_ID: "order-1"}))
    store.commit()
    assert rec.take() == []  # dropped as the duplicate it is
    broker.close()


def test_removing_a_row_committed_earlier_is_committed_even_after_storing_it_again(
        tmp_path: Path) -> None:
    """Storing a message whose row already exists overwrites that row; removing it then
    removes a row the file holds, so the transaction has an effect and is committed."""
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path, group_commit=True)
    store.add_message("q", m("a"))
    store.commit()
    store.add_message("q", m("a"))
    store.remove_message("q", "a")
    store.commit()
    assert store.unwritten == 0
    assert rows_on_disk(path) == []


def test_a_change_undone_by_a_failed_batch_still_commits_what_remains(
        tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path, group_commit=True)
    store.add_message("q", m("a"))
    with pytest.raises(RuntimeError), store.batch():
        store.remove_message("q", "a")
        raise RuntimeError("the operation failed half-way")
    store.commit()
    assert rows_on_disk(path) == ["a"]


def test_sequence_numbers_are_not_handed_out_again_after_a_transaction_is_elided(
        tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path, group_commit=True)
    first = store.add_message("q", m("a"))
    store.commit()
    elided = store.add_message("q", m("b"))
    store.remove_message("q", "b")
    store.commit()
    assert store.unwritten == 1
    later = store.add_message("q", m("c"))
    store.commit()
    assert first < elided < later
    store.close()
    reopened = SqliteStore(path, group_commit=True)
    assert reopened.add_message("q", m("d")) > later
    reopened.close()


# -- adds kept for the commit (``add_message(..., deferrable=True)``, the enqueue's) ------


@pytest.fixture
def kept(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "s.sqlite", group_commit=True)


def test_a_kept_add_is_seen_by_every_read_before_the_commit(kept: SqliteStore) -> None:
    kept.add_message("q", m("a"), deferrable=True)
    assert kept.pending and kept.must_sync  # its RECEIPT waits for the commit
    assert kept.stored_counts() == {"q": 1}
    assert kept.message_ids("q") == ["a"]
    kept.commit()
    assert rows_on_disk(kept.path) == ["a"]


def test_a_kept_add_is_on_disk_after_the_commit_and_a_restart(kept: SqliteStore) -> None:
    kept.add_message("q", m("a"), deferrable=True)
    assert rows_on_disk(kept.path) == []
    kept.commit()
    kept.close()
    again = SqliteStore(kept.path, group_commit=True)
    assert [s.message.message_id for s in again.read_queue("q")] == ["a"]
    again.close()


def test_a_delivery_count_written_before_the_commit_lands_on_the_kept_row(
        kept: SqliteStore) -> None:
    kept.add_message("q", m("a"), deferrable=True)
    kept.update_delivery_count("q", "a", 2)
    kept.commit()
    assert kept.delivery_count("q", "a") == 2


def test_a_queue_deleted_before_the_commit_keeps_none_of_its_adds(kept: SqliteStore) -> None:
    kept.add_message("q", m("a"), deferrable=True)
    kept.add_message("other", m("b", "other"), deferrable=True)
    kept.delete_queue("q")
    kept.commit()
    assert rows_on_disk(kept.path) == ["b"]


def test_in_a_failed_batch_the_removal_of_a_kept_add_is_undone(kept: SqliteStore) -> None:
    kept.add_message("q", m("a"), deferrable=True)
    with pytest.raises(RuntimeError), kept.batch():
        kept.remove_message("q", "a")
        raise RuntimeError("the operation failed half-way")
    kept.commit()
    assert rows_on_disk(kept.path) == ["a"]


def test_the_same_message_kept_twice_is_one_row(kept: SqliteStore) -> None:
    kept.add_message("q", m("a"), deferrable=True)
    kept.add_message("q", m("a"), deferrable=True)
    kept.commit()
    assert rows_on_disk(kept.path) == ["a"]
