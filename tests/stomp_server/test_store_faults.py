"""A full disk (or an I/O error) is a refusal, not a crash: the SEND whose message cannot
be stored gets an ERROR naming the cause, nothing receipted before is lost, consumers of
other queues keep getting messages and their acks keep working, and sends succeed again
once the store writes again. The fault is injected at the store's write seam
(``GroupWrites._execute``), as SQLite and the OS raise it."""

from __future__ import annotations

import asyncio
import errno
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from stomp_pair import StompPair
from test_server_flush import _client, _commands, _frame

from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.stomp.server import StompServer
from jmspy.broker_ref.store.sqlite_store import SqliteStore
from jmspy.stomp_frames import header_dict

FULL_ERRORS: dict[str, Callable[[], BaseException]] = {
    "ENOSPC": lambda: OSError(errno.ENOSPC, "No space left on device"),
    "SQLITE_FULL": lambda: sqlite3.OperationalError("database or disk is full"),
}


class Faults:
    """The store's write seam, failing writes and commits on demand (what a full disk
    fails: BEGIN and SAVEPOINT touch no disk)."""

    def __init__(self, store: SqliteStore) -> None:
        self.real = store._execute
        self.error: Callable[[], BaseException] | None = None
        #: which statements fail: (sql, params) -> bool
        self.which: Callable[[str, Any], bool] = lambda sql, params: True
        store._execute = self  # type: ignore[method-assign]

    def __call__(self, sql: str, params: Any = ()) -> Any:
        if self.error is not None and sql.startswith(_WRITES) and self.which(sql, params):
            raise self.error()
        return self.real(sql, params)


_WRITES = ("INSERT", "UPDATE", "DELETE", "COMMIT")


def stored(path: Path, queue: str) -> list[str]:
    """What a fresh reader of the file finds (committed rows only)."""
    db = sqlite3.connect(str(path))
    try:
        return [r[0] for r in db.execute("SELECT id FROM messages WHERE queue = ? ORDER BY "
                                         "seq", (queue,))]
    finally:
        db.close()


def commands(frames: list[Any]) -> list[str]:
    return [f.command for f in frames]


@pytest.mark.parametrize("error", sorted(FULL_ERRORS))
def test_a_send_the_full_store_cannot_keep_gets_an_error_and_the_rest_carries_on(
        tmp_path: Path, error: str) -> None:
    path = tmp_path / "m.sqlite"
    store = SqliteStore(path)
    faults = Faults(store)
    pair = StompPair(store=store)
    producer = pair.client()
    for i in range(3):
        assert commands(producer.send("/queue/orders", f"o{i}", persistent="true",
                                      receipt=f"r{i}")) == ["RECEIPT"]
    other = pair.client()
    other.send("/queue/other", "x0", "x1", persistent="true")
    receipted = stored(path, "orders")
    assert len(receipted) == 3

    faults.error = FULL_ERRORS[error]  # the disk is full: every write fails
    answer = producer.send("/queue/orders", "lost", persistent="true", receipt="r3")
    assert commands(answer) == ["ERROR"]
    headers = header_dict(answer[0].headers)
    assert headers["receipt-id"] == "r3"
    assert headers["message"].startswith("the broker's store is full (disk full at "
                                         f"{tmp_path})")
    assert "message not stored" in answer[0].body.decode()

    consumer = pair.client()  # another queue's consumer is served, and may ack
    consumer.subscribe("/queue/other", "s", ack="client-individual")
    assert consumer.bodies() == ["x0", "x1"]
    for message in consumer.messages:
        assert commands(consumer.ack(message, receipt="a")) == ["RECEIPT"]
    assert stored(path, "orders") == receipted  # nothing receipted was lost

    faults.error = None  # space is back
    again = pair.client()
    assert commands(again.send("/queue/orders", "o4", persistent="true",
                               receipt="r4")) == ["RECEIPT"]
    assert stored(path, "other") == []  # the acks' deletes were made once it wrote again
    assert len(stored(path, "orders")) == 4 and stored(path, "orders")[:3] == receipted
    assert pair.broker.usage()["storeState"] == "ok"
    pair.broker.close()

    restarted = StompPair(store=SqliteStore(path))
    reader = restarted.client()
    reader.subscribe("/queue/orders", "s")
    assert reader.bodies() == ["o0", "o1", "o2", "o4"]
    restarted.broker.close()


def test_while_writes_fail_the_stats_say_why(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.sqlite")
    faults = Faults(store)
    pair = StompPair(store=store)
    faults.error = FULL_ERRORS["ENOSPC"]
    pair.client().send("/queue/q", "x", persistent="true")
    usage = pair.broker.usage()
    assert usage["storeState"] == "refusing writes"
    assert "store is full" in str(usage["storeFault"])
    pair.broker.close()


def test_stats_stop_saying_refusing_once_acks_freed_room_for_sends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk stays full (the reserve cannot be taken back), but acks freed pages in
    the store and SENDs are stored again there: the stats say the store is short of
    space, not that it refuses writes (they said so while it took every SEND)."""
    monkeypatch.setattr("jmspy.broker_ref.store.store_writes.free_bytes", lambda path: 0)
    store = SqliteStore(tmp_path / "m.sqlite", reserve=1 << 20)
    faults = Faults(store)
    pair = StompPair(store=store)
    producer = pair.client()
    producer.send("/queue/q", *(f"{i:04}" + "y" * 1000 for i in range(1000)),
                  persistent="true")
    faults.error = FULL_ERRORS["ENOSPC"]
    assert commands(producer.send("/queue/q", "lost", persistent="true",
                                  receipt="r")) == ["ERROR"]
    faults.error = None
    assert pair.broker.usage()["storeState"] == "refusing writes"  # no room freed yet
    consumer = pair.client()
    consumer.subscribe("/queue/q", "s", ack="auto")
    assert len(consumer.bodies()) == 1000  # their deletes free the pages
    again = pair.client()
    assert commands(again.send("/queue/r", "in", persistent="true",
                               receipt="r")) == ["RECEIPT"]
    usage = pair.broker.usage()
    assert usage["storeState"] == "short of space"
    assert "stored again" in str(usage["storeFault"])
    pair.broker.close()


def test_io_errors_in_a_row_make_the_store_unusable(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.sqlite")
    faults = Faults(store)
    pair = StompPair(store=store)
    faults.error = lambda: sqlite3.OperationalError("disk I/O error")
    for i in range(3):
        answer = pair.client().send("/queue/q", f"x{i}", persistent="true", receipt="r")
        assert commands(answer) == ["ERROR"]
        assert "I/O error" in header_dict(answer[0].headers)["message"] or i == 2
    assert store.unusable is not None and "unusable" in store.unusable
    faults.error = None  # a store once unusable stays so: its host stops
    answer = pair.client().send("/queue/q", "late", persistent="true", receipt="r")
    assert commands(answer) == ["ERROR"]
    pair.broker.close()


def _group_commit_host(path: Path) -> tuple[
        SqliteStore, Faults, Broker, StompServer, list[tuple[str, bytes]]]:
    """A group-committing store at ``path`` with faults to inject, its broker, an
    in-process STOMP host on it, and the (connection name, bytes) log its connections
    write to (see ``_client``)."""
    store = SqliteStore(path, group_commit=True)
    faults = Faults(store)  # before the broker, which writes through the seam too
    broker = Broker(name="faults", store=store)
    return store, faults, broker, StompServer(broker, heartbeat_ms=0), []


async def _group_commit_fails_for_one(path: Path) -> tuple[list[tuple[str, str]], str]:
    """Two producers' persistent SENDs in one group commit; the commit fails for space
    and, redone write by write, only the first producer's message cannot be written."""
    store, faults, broker, server, log = _group_commit_host(path)
    a = _client(server, "a", log)
    b = _client(server, "b", log)
    log.clear()
    a.data_received(_frame("SEND", destination="/queue/a", persistent="true", receipt="ra"))
    b.data_received(_frame("SEND", destination="/queue/b", persistent="true", receipt="rb"))
    assert store.pending and log == []  # both wait for one commit
    faults.error = FULL_ERRORS["SQLITE_FULL"]
    faults.which = lambda sql, params: sql == "COMMIT" or (
        sql.startswith("INSERT") and params[1] == "a")  # (seq, queue, ...)
    await asyncio.sleep(0)  # one loop turn: the flush callbacks commit, then write
    error = next(data for name, data in log if name == "a")
    for conn in (a, b):
        conn.close()
    broker.close()
    return _commands(log), error.decode()


async def _send_that_makes_the_store_unusable(path: Path) -> dict[str, list[bytes]]:
    """Writes already failing one at a time (an I/O error each), a third connection's
    SEND fails too and makes the store unusable, which stops the broker: what each
    connection was written, by name."""
    store, faults, broker, server, log = _group_commit_host(path)
    idle = _client(server, "idle", log)
    faults.error = lambda: sqlite3.OperationalError("disk I/O error")
    senders = [_client(server, f"s{i}", log) for i in range(3)]
    for conn in senders:
        conn.data_received(_frame("SEND", destination="/queue/q", persistent="true",
                                  receipt="r"))
        await asyncio.sleep(0)  # one loop turn: the flush callbacks commit, then write
    assert store.unusable is not None and server.failed is not None
    for conn in (idle, *senders):
        conn.close()
    broker.close()
    written: dict[str, list[bytes]] = {}
    for name, data in log:
        written.setdefault(name, []).append(data)
    return written


def test_every_connection_gets_an_error_as_writes_fail_and_the_store_becomes_unusable(
        tmp_path: Path) -> None:
    """Every connection whose SEND failed gets an ERROR, and the broker stopping ends
    every other one with an ERROR naming why. A connection refused by the host after its
    session had made an ERROR of its own (which the refusal drops with the rest of its
    unwritten output) was closed with no frame at all."""
    written = asyncio.run(_send_that_makes_the_store_unusable(tmp_path / "m.sqlite"))
    for name in ("idle", "s0", "s1", "s2"):
        frames = [f for f in written.get(name, []) if not f.startswith(b"CONNECTED")]
        assert [f.split(b"\n", 1)[0] for f in frames] == [b"ERROR"], name
    for name in ("idle", "s2"):  # the stop's ERROR names why
        assert b"unusable" in written[name][-1], name
    assert b"I/O error" in written["s1"][-1]


def test_a_failed_group_commit_refuses_only_the_sends_it_lost(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    written, error = asyncio.run(_group_commit_fails_for_one(path))
    assert ("a", "ERROR") in written and ("a", "RECEIPT") not in written
    assert ("b", "RECEIPT") in written
    assert "may not be stored" in error and "store is full" in error
    assert stored(path, "b") != [] and stored(path, "a") == []


def test_a_kept_add_the_commit_cannot_write_names_its_writer(tmp_path: Path) -> None:
    """The enqueue's add is kept for the group commit (no consumer took the message);
    the disk is full when the commit makes it: the writer is named, as for any write
    the commit lost, so its RECEIPT becomes an ERROR; the other writer's add is kept."""
    from jmspy.broker_ref.core import BodyType, DestinationKind, ServerMessage

    path = tmp_path / "m.sqlite"
    store = SqliteStore(path, group_commit=True)
    faults = Faults(store)
    for writer, queue in (("a", "qa"), ("b", "qb")):
        store.writer = writer
        store.add_message(queue, ServerMessage(f"id-{queue}", DestinationKind.QUEUE, queue,
                                               BodyType.TEXT, "x", persistent=True),
                          deferrable=True)
    faults.error = FULL_ERRORS["SQLITE_FULL"]
    faults.which = lambda sql, params: sql == "COMMIT" or (
        sql.startswith("INSERT") and params[1] == "qa")  # (seq, queue, ...)
    store.commit()
    assert store.take_failed_writers() == {"a"}
    assert stored(path, "qa") == [] and stored(path, "qb") == ["id-qb"]
    store.close()


def test_over_vm_a_full_disk_fails_the_send_and_the_commit_not_the_broker(
        tmp_path: Path) -> None:
    """``vm://`` commits each operation alone: a send or a transaction's commit the store
    cannot keep raises ResourceAllocationException naming the cause; nothing of the
    transaction is stored; acks go on; sends work again once space is back."""
    from jmspy import ConnectionFactory, Queue
    from jmspy.errors import ResourceAllocationException, TransactionRolledBackException
    from jmspy.transports import vm

    host = vm.start_broker("store-faults", data_dir=tmp_path)
    try:
        assert host.data_dir is not None
        store = host.data_dir.store
        path = store.path
        faults = Faults(store)
        with ConnectionFactory("vm://store-faults").create_connection() as conn:
            s = conn.create_session()
            producer = s.create_producer(Queue("orders"))
            producer.send(s.create_text_message("kept"))
            tx = conn.create_session(transacted=True)
            tx_producer = tx.create_producer(Queue("orders"))
            faults.error = FULL_ERRORS["SQLITE_FULL"]
            with pytest.raises(ResourceAllocationException, match="store is full"):
                producer.send(s.create_text_message("refused"))
            tx_producer.send(tx.create_text_message("t1"))
            tx_producer.send(tx.create_text_message("t2"))
            with pytest.raises(TransactionRolledBackException, match="store is full"):
                tx.commit()
            consumer = s.create_consumer(Queue("orders"))
            conn.start()
            got = consumer.receive(5.0)  # acked (auto) while the disk is full
            assert got is not None and got.text == "kept"
            assert consumer.receive_no_wait() is None  # nothing refused was enqueued
            faults.error = None
            producer.send(s.create_text_message("after"))
            # on disk now: "after" alone (the ack's delete was made; nothing refused)
            assert len(stored(path, "orders")) == 1
            again = consumer.receive(5.0)
            assert again is not None and again.text == "after"
    finally:
        vm.stop_broker("store-faults")
