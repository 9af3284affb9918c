"""``[system-usage]``: sizes as ActiveMQ writes them, the memory limit that sets the
paging budget, and the store limit that refuses persistent sends (nothing dropped)."""

from __future__ import annotations

from pathlib import Path

import pytest
from core_support import FakeClock, Recorder, msg

from jmspy.broker_ref.config import ConfigError, parse_config, parse_size
from jmspy.broker_ref.core import Broker, DestinationKind, ResourceLimitExceeded
from jmspy.broker_ref.core.broker import DEFAULT_MEMORY_LIMIT, DEFAULT_STORE_LIMIT
from jmspy.broker_ref.core.sqlite_store import SqliteStore


@pytest.mark.parametrize(("text", "size"), [
    (4096, 4096), ("4096", 4096), ("512 KB", 512 * 1024), ("64 MB", 64 * 1024**2),
    ("64mb", 64 * 1024**2), ("1.5 GB", 3 * 1024**3 // 2), ("100 GB", 100 * 1024**3),
    ("10 B", 10),
])
def test_sizes_read_as_activemq_writes_them(text: object, size: int) -> None:
    assert parse_size(text, "x") == size


@pytest.mark.parametrize("bad", ["lots", "10 XB", "-5 MB", "", True, 1.5, "MB"])
def test_a_bad_size_is_refused_naming_key_value_and_file(bad: object) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"system-usage": {"memory-limit": bad}}, "broker.toml")
    assert "broker.toml: [system-usage] memory-limit" in str(err.value)
    assert repr(bad) in str(err.value) and "64 MB" in str(err.value)


def test_system_usage_reaches_the_broker_with_the_seeds_defaults() -> None:
    default = parse_config({}, "x").broker_kwargs()
    assert (default["memory_limit"], default["store_limit"]) == (
        DEFAULT_MEMORY_LIMIT, DEFAULT_STORE_LIMIT) == (64 * 1024**2, 100 * 1024**3)
    cfg = parse_config({"system-usage": {"memory-limit": "1 MB", "store-limit": "2 GB"}}, "x")
    b = Broker(**cfg.broker_kwargs())
    assert b.memory_limit == 1024**2 and b.budget.limit == 1024**2 * 70 // 100
    assert b.store_limit == 2 * 1024**3
    b.close()
    with pytest.raises(ConfigError, match="disk-limit"):
        parse_config({"system-usage": {"disk-limit": "1 MB"}}, "x")


def test_a_full_store_refuses_persistent_sends_and_keeps_what_it_has(
        tmp_path: Path, clock: FakeClock) -> None:
    store = SqliteStore(tmp_path / "m.sqlite")
    b = Broker(store=store, clock=clock, store_limit=store.size_bytes() + 64 * 1024)
    c = b.connect(Recorder())
    sent = 0
    with pytest.raises(ResourceLimitExceeded) as err:
        for i in range(100_000):
            c.send(msg("q", "x" * 1000 + str(i)))
            sent += 1
    assert str(tmp_path / "m.sqlite") in str(err.value) and "store-limit" in str(err.value)
    c.send(msg("q", "np", persistent=False))  # non-persistent: not the store's to refuse
    assert b.stats("q").message_count == sent + 1  # nothing accepted was dropped
    assert store.stored_counts() == {"q": sent}
    rec = Recorder()
    c2 = b.connect(rec)
    c2.create_consumer(1, DestinationKind.QUEUE, "q", credit=sent + 1)
    got = rec.take()
    assert len(got) == sent + 1
    c2.ack([d.delivery_tag for d in got])
    store.compact()  # give the space back to the file system
    c.send(msg("q", "again"))  # space again: accepted at once
    assert b.stats("q").message_count == 1
