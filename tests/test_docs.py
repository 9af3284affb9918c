"""Documentation that code generates or relies on must not drift from the code."""

from __future__ import annotations

from pathlib import Path

from jmspy.properties import reference_table

ROOT = Path(__file__).resolve().parent.parent


def test_readme_property_table_matches_the_property_definitions():
    readme = (ROOT / "README.md").read_text()
    assert reference_table() in readme


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "```sh\nbash .ci/test\n```" in readme
    assert ci.rstrip().splitlines()[-1] == "bash .ci/test"


def test_readme_broker_config_example_loads(tmp_path):
    import re

    from jmspy.broker_ref.config import load_config

    readme = (ROOT / "README.md").read_text()
    (example,) = re.findall(r"```toml\n(.*?)```", readme, re.S)
    path = tmp_path / "broker.toml"
    path.write_text(example)
    config = load_config(path)
    assert config.settings["ring.#"].default_ring_size == 3
    assert config.settings["orders.#"].consumer_flow_limit == 100
    assert config.security is not None and config.security.enabled
    assert (config.memory_limit, config.store_limit) == (64 * 1024**2, 100 * 1024**3)
    assert (config.temp_limit, config.send_fail_if_no_space,
            config.send_fail_if_no_space_after_timeout) == (10 * 1024**3, False, 0)
    assert config.settings["orders.#"].memory_limit == 10 * 1024**2
    prices = config.settings["PRICES.>"]
    assert (prices.producer_flow_control, prices.pending_message_limit) == (False, 10)


def test_every_config_key_is_in_the_readme():
    """Every [system-usage] key and every address setting appears in the README's config
    section, under its kebab-case name."""
    import dataclasses

    from jmspy.broker_ref.config import _SYSTEM_USAGE
    from jmspy.broker_ref.core.api import AddressSettings

    readme = (ROOT / "README.md").read_text()
    for key in _SYSTEM_USAGE:
        assert f"{key} = " in readme, key
    for f in dataclasses.fields(AddressSettings):
        assert f"`{f.name.replace('_', '-')}`" in readme or (
            f"{f.name.replace('_', '-')} = " in readme), f.name


def test_security_page_example_loads_and_means_what_the_page_says(tmp_path):
    """docs/security.md's worked example: the rules its last paragraph states."""
    import re

    from jmspy.broker_ref.config import load_config
    from jmspy.broker_ref.core import AccessDenied, Broker, DestinationKind, ServerMessage

    page = (ROOT / "docs" / "security.md").read_text()
    (example,) = re.findall(r"```toml\n(.*?)```", page, re.S)
    path = tmp_path / "broker.toml"
    path.write_text(example)
    config = load_config(path)
    assert (config.connect_timeout, config.max_connections_per_address) == (10, 200)
    broker = Broker(**config.broker_kwargs())

    class Inbox:
        def __init__(self):
            self.got = []

        def deliver(self, delivery):
            self.got.append(delivery.message)

        def consumer_closed(self, consumer_id, reason):
            pass

    alice_box, guest_box = Inbox(), Inbox()
    alice = broker.connect(alice_box, user="alice", password="change-me")
    guest = broker.connect(guest_box)
    guest.create_consumer(1, DestinationKind.TOPIC, "prices.#", credit=10)
    for name in ("prices.eur", "prices.eur.internal"):
        alice.send(ServerMessage(f"ID:{name}", DestinationKind.TOPIC, name, body="x",
                                 properties={"JMSXUserID": "mallory"}))
    assert [(m.destination, m.properties["JMSXUserID"]) for m in guest_box.got] == [
        ("prices.eur", "alice")]
    alice.create_consumer(2, DestinationKind.QUEUE, "orders.eu", credit=10)
    alice.send(ServerMessage("ID:o", DestinationKind.QUEUE, "orders.eu", body="o"))
    assert [m.body for m in alice_box.got] == ["o"]
    try:
        alice.all_stats()
    except AccessDenied:
        pass
    else:
        raise AssertionError("alice may not read statistics")
    audrey = broker.connect(Inbox(), user="audrey", password="change-me-too")
    assert {s.name for s in audrey.all_stats()} >= {"orders.eu", "prices.eur"}
