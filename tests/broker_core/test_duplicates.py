"""Duplicate detection (Artemis's id cache): a message whose ``_AMQ_DUPL_ID`` its address
saw among its last ``duplicate-id-cache-size`` ids (no older than
``duplicate-id-max-age-ms``) is dropped -- also inside a transaction, whose other sends
still commit -- so a producer that sends again after a failure (a retried Spark task) puts
each message in once; persistent messages' ids are in the store, so a restart keeps them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from core_support import FakeClock, Recorder, msg, tmsg

from jmspy.broker_ref.core import Broker, DestinationKind, DestinationNotFound, duplicates
from jmspy.broker_ref.core.api import AddressSettings
from jmspy.broker_ref.core.duplicates import DUPLICATE_ID
from jmspy.broker_ref.store.sqlite_store import SqliteStore
from jmspy.broker_ref.store.store import MemoryStore


def dup(dest: str, dup_id: str, **kw: Any) -> Any:
    return msg(dest, dup_id, properties={DUPLICATE_ID: dup_id}, **kw)


def test_a_second_message_with_the_same_duplicate_id_is_dropped() -> None:
    b = Broker()
    c = b.connect(Recorder())
    for dup_id in ("a", "b", "a", "c", "b"):
        c.send(dup("q", dup_id))
    c.send(msg("q", "no id"))
    c.send(msg("q", "no id"))  # messages without an id are never duplicates
    assert b.stats("q").message_count == 5
    assert b.post_office.duplicates.dropped == {"q": 2}


def test_the_cache_keeps_the_last_n_ids_per_address_and_zero_turns_it_off() -> None:
    b = Broker(settings={"small": AddressSettings(duplicate_id_cache_size=2),
                         "off": AddressSettings(duplicate_id_cache_size=0)})
    c = b.connect(Recorder())
    for dup_id in ("a", "b", "c", "a", "c"):  # "a" fell out of a cache of 2; "c" did not
        c.send(dup("small", dup_id))
    assert b.stats("small").message_count == 4
    for _ in range(3):
        c.send(dup("off", "x"))
    assert b.stats("off").message_count == 3
    c.send(dup("other", "a"))  # another address has its own cache
    assert b.stats("other").message_count == 1


def test_a_transaction_drops_its_duplicates_and_commits_the_rest() -> None:
    b = Broker()
    c = b.connect(Recorder())
    c.send(dup("q", "1"))
    c.begin("tx")
    for dup_id in ("1", "2", "3"):
        c.send(dup("q", dup_id), "tx")
    c.commit("tx")
    assert b.stats("q").message_count == 3  # 1 (first send), 2, 3
    c.begin("retry")  # a retried task sends the same again: nothing new, commit succeeds
    for dup_id in ("1", "2", "3"):
        c.send(dup("q", dup_id), "retry")
    c.commit("retry")
    assert b.stats("q").message_count == 3


def test_topics_detect_duplicates_by_topic_name() -> None:
    b = Broker()
    rec = Recorder()
    c = b.connect(rec)
    c.create_consumer(1, DestinationKind.TOPIC, "prices", credit=10)
    for dup_id in ("x", "x", "y"):
        c.send(tmsg("prices", dup_id, properties={DUPLICATE_ID: dup_id}))
    assert rec.bodies() == ["x", "y"]


# --- the durable window: count and age, kept in the store across restarts --------------

def _restart_stores(tmp_path: Path) -> list[Callable[[], Any]]:
    """Two stores that survive a restart: each call opens the same store again."""
    memory = MemoryStore()
    return [lambda: memory, lambda: SqliteStore(tmp_path / "s.sqlite")]


@pytest.mark.parametrize("which", ["memory", "sqlite"])
def test_persistent_messages_ids_survive_a_broker_restart_and_non_persistent_do_not(
        tmp_path: Path, which: str) -> None:
    open_store = _restart_stores(tmp_path)[which == "sqlite"]
    store = open_store()
    b = Broker(store=store)
    c = b.connect(Recorder())
    c.begin("tx")
    for i in range(100):
        c.send(dup("q", f"job:0:{i}"), "tx")
    c.commit("tx")
    c.send(dup("q", "volatile", persistent=False))
    store.close()
    again = open_store()
    b2 = Broker(store=again)  # restarted on the same store
    c2 = b2.connect(Recorder())
    c2.begin("retry")  # the retried job, after the restart: every row is a duplicate
    for i in range(100):
        c2.send(dup("q", f"job:0:{i}"), "retry")
    c2.commit("retry")
    assert b2.stats("q").message_count == 100
    assert b2.stats("q").duplicates_dropped == 100
    # the non-persistent message is gone with the restart, and so is its id: its resend
    # is taken (dropping it would lose it)
    c2.send(dup("q", "volatile", persistent=False))
    assert b2.stats("q").message_count == 101


@pytest.mark.parametrize("which", ["memory", "sqlite"])
def test_the_window_keeps_the_newest_n_ids_across_a_restart_and_trims_the_store(
        tmp_path: Path, which: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(duplicates, "TRIM_EVERY", 4)
    open_store = _restart_stores(tmp_path)[which == "sqlite"]
    settings = {"q": AddressSettings(duplicate_id_cache_size=10)}
    store = open_store()
    c = Broker(store=store, settings=settings).connect(Recorder())
    for i in range(50):
        c.send(dup("q", f"id{i}"))
    kept = [k for k, _, _ in store.load_duplicate_ids()["q"]]
    assert kept[-10:] == [f"id{i}" for i in range(40, 50)]  # the window...
    assert len(kept) < 10 + 4 + 1  # ...and at most TRIM_EVERY more: the store is trimmed
    store.close()
    b2 = Broker(store=open_store(), settings=settings)
    c2 = b2.connect(Recorder())
    c2.send(dup("q", "id39"))  # fell out of the window of 10: taken again
    c2.send(dup("q", "id45"))  # in it: dropped, after the restart too
    assert b2.stats("q").message_count == 51
    assert b2.stats("q").duplicates_dropped == 1
    assert b2.post_office.duplicates.window("q")[-1] == "id39"


@pytest.mark.parametrize("which", ["memory", "sqlite"])
def test_ids_older_than_the_max_age_are_forgotten_across_a_restart_too(
        tmp_path: Path, which: str) -> None:
    open_store = _restart_stores(tmp_path)[which == "sqlite"]
    settings = {"q": AddressSettings(duplicate_id_max_age_ms=60_000)}
    clock = FakeClock()
    store = open_store()
    c = Broker(store=store, settings=settings, clock=clock).connect(Recorder())
    c.send(dup("q", "old"))
    clock.advance(30_000)
    c.send(dup("q", "young"))
    clock.advance(20_000)
    c.send(dup("q", "old"))  # 50 s old: still in the window
    assert store.load_duplicate_ids()["q"][0][0] == "old"
    store.close()
    clock.advance(15_000)  # "old" is 65 s old now, "young" 35 s
    b2 = Broker(store=open_store(), settings=settings, clock=clock)
    c2 = b2.connect(Recorder())
    c2.send(dup("q", "old"))  # aged out: taken
    c2.send(dup("q", "young"))  # dropped
    assert b2.stats("q").message_count == 3
    assert b2.stats("q").duplicates_dropped == 1
    assert b2.post_office.duplicates.window("q") == ["young", "old"]


def test_a_send_that_fails_leaves_no_id_to_drop_its_retry() -> None:
    b = Broker(settings={"closed": AddressSettings(auto_create=False)})
    c = b.connect(Recorder())
    with pytest.raises(DestinationNotFound):
        c.send(dup("closed", "d1"))
    assert b.post_office.duplicates.window("closed") == []


def test_the_defaults_hold_a_million_ids_for_a_week() -> None:
    s = AddressSettings()
    assert (s.duplicate_id_cache_size, s.duplicate_id_max_age_ms) == (
        1_000_000, 7 * 24 * 3600 * 1000)
    with pytest.raises(ValueError, match="duplicate_id_max_age_ms must be an int >= 0"):
        AddressSettings(duplicate_id_max_age_ms=-1)
