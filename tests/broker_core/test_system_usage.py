"""``[system-usage]``: sizes as ActiveMQ writes them, the memory limit that sets the
paging budget, and the store limit that refuses persistent sends (nothing dropped)."""

from __future__ import annotations

from pathlib import Path

import pytest
from core_support import FakeClock, Recorder, msg

from jmspy.broker_ref.config import ConfigError, parse_config, parse_size
from jmspy.broker_ref.core import Broker, DestinationKind, ResourceLimitExceeded
from jmspy.broker_ref.core.broker import DEFAULT_MEMORY_LIMIT, DEFAULT_STORE_LIMIT
from jmspy.broker_ref.store.sqlite_store import SqliteStore


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


def test_every_resource_key_of_seed_003_reaches_the_broker_with_its_default() -> None:
    b = Broker(**parse_config({}, "x").broker_kwargs())
    assert b.flow.temp_limit == 10 * 1024**3
    assert (b.flow.fail_if_no_space, b.flow.fail_after_ms) == (False, 0)
    s = b.settings_for("any")
    assert (s.memory_limit, s.producer_flow_control, s.pending_message_limit) == (
        None, True, None)
    cfg = parse_config({
        "system-usage": {"temp-limit": "512 KB", "send-fail-if-no-space": True,
                         "send-fail-if-no-space-after-timeout": 500},
        "address-settings": {"PRICES.>": {"memory-limit": "10 MB",
                                          "producer-flow-control": False,
                                          "pending-message-limit": 10}},
    }, "broker.toml")
    b = Broker(**cfg.broker_kwargs())
    assert b.flow.temp_limit == 512 * 1024
    assert (b.flow.fail_if_no_space, b.flow.fail_after_ms) == (True, 500)
    s = b.settings_for("PRICES.ibm")
    assert (s.memory_limit, s.producer_flow_control, s.pending_message_limit) == (
        10 * 1024**2, False, 10)
    assert b.flow.destination_limits


@pytest.mark.parametrize(("table", "key", "value", "says"), [
    ("system-usage", "temp-limt", "1 MB", "unknown key 'temp-limt'"),
    ("system-usage", "send-fail-if-no-spaces", True, "unknown key 'send-fail-if-no-spaces'"),
    ("system-usage", "temp-limit", "ten", "[system-usage] temp-limit = 'ten' is not a size"),
    ("system-usage", "send-fail-if-no-space", "yes", "send-fail-if-no-space = 'yes'"),
    ("system-usage", "send-fail-if-no-space-after-timeout", -1, "must be >= 0"),
    ("address-settings", "memory-limt", "1 MB", "unknown key 'memory-limt'"),
    ("address-settings", "memory-limit", "1 XB", "memory-limit = '1 XB' is not a size"),
    ("address-settings", "producer-flow-controll", False, "unknown key"),
    ("address-settings", "pending-message-limit", 0, "must be >= 1"),
])
def test_a_misspelt_or_bad_resource_key_is_refused_naming_it_and_the_file(
        table: str, key: str, value: object, says: str) -> None:
    data = ({table: {"q": {key: value}}} if table == "address-settings"
            else {table: {key: value}})
    with pytest.raises(ConfigError) as err:
        parse_config(data, "broker.toml")
    assert says in str(err.value) and "broker.toml" in str(err.value)
