"""The TLS benchmark's logic without brokers (benchmarks/tls.py): its rows and goals, the
specs each row's workers get (TLS on the TLS rows only, the same workload on both
wires), and the TLS cost per message it states. No measuring here."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

# Appended, not prepended: the installed jmspy must win over the checkout's jmspy/ folder.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmarks import report, tls
from benchmarks.common import Row

FILES = SimpleNamespace(ca=Path("/ca.pem"), client_cert=Path("/alice.pem"),
                        client_key=Path("/alice.key"))


def _peers() -> tls.Peers:
    peers = tls.Peers(FILES)
    for name, mutual in (("jmspy", False), ("activemq", False), ("rabbitmq", True),
                         ("mosquitto", False)):
        peers._started[name] = tls.TlsPeer(name, "127.0.0.1", 1000, 2000, mutual=mutual)
    return peers


def test_every_pair_is_measured_over_tls_and_plain_with_a_goal_over_tls() -> None:
    rows = [c.row for c in tls.configs(_peers(), 100)]
    assert {r.key for r in rows} == {
        tls.key(client, broker, wire) for client in tls.CLIENTS for wire in tls.WIRES
        for broker in ("jmspy", "activemq", "rabbitmq", "mosquitto")}
    for row in rows:
        jmspy, wire = row.key.split("/")[1] == "jmspy", row.key.rsplit("/", 1)[1]
        assert row.baseline == (row.key.replace("/jmspy/", "/raw/") if jmspy else None)
        goals = [(g.bound, g.over, g.issue) for g in row.goals]
        assert goals == ([(1.0, row.baseline, 47)] if jmspy and wire == "tls" else [])


def test_the_tls_rows_run_tls_clients_on_the_tls_port_and_the_plain_rows_do_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {}
    cfgs = tls.configs(_peers(), 100)

    for cfg in cfgs:
        def fake(module: str, consumer: dict[str, Any], producer: dict[str, Any],
                 key: str = cfg.row.key) -> dict[str, Any]:
            seen[key] = (module, consumer, producer)
            return {"rate": 1.0}

        monkeypatch.setattr(tls, "run_pair", fake)
        assert cfg.run(0) == {"rate": 1.0}
    for key, (module, consumer, producer) in seen.items():
        _, client, broker, wire = key.split("/")
        assert module == ("part_d_mqtt" if broker == "mosquitto" else "workers")
        for spec in (consumer, producer):
            assert spec["port"] == (2000 if wire == "tls" else 1000), key
            url = spec.get("url", "")
            if client == "jmspy":
                assert url.split(":", 1)[0] == {
                    ("tls", True): "mqtts", ("plain", True): "mqtt", ("tls", False):
                    "stomp+ssl", ("plain", False): "stomp"}[wire, broker == "mosquitto"]
                assert ("ca_file=/ca.pem" in url) == (wire == "tls")
                assert ("cert_file=/alice.pem" in url) == (wire == "tls" and
                                                         broker == "rabbitmq")
                assert "tls" not in spec
            else:
                want = None if wire == "plain" else {
                    "ca": "/ca.pem", "cert": "/alice.pem" if broker == "rabbitmq" else None,
                    "key": "/alice.key" if broker == "rabbitmq" else None}
                assert spec.get("tls") == want, key
        plain = seen[key.rsplit("/", 1)[0] + "/plain"][1]
        same = {k: v for k, v in consumer.items() if k not in ("port", "url", "tls", "dest")}
        assert same == {k: v for k, v in plain.items()
                        if k not in ("port", "url", "tls", "dest")}, key


def _row(key: str, rates: list[float]) -> Row:
    return Row("t", key, key, "cfg", runs=[{"rate": r} for r in rates])


def test_the_tls_cost_is_the_median_of_the_rounds_extra_time_per_message() -> None:
    tls_row = _row("t/jmspy/jmspy/tls", [5_000.0, 4_000.0, 2_000.0])
    plain = _row("t/jmspy/jmspy/plain", [10_000.0, 5_000.0, 10_000.0])
    # per round: 200 - 100 = 100, 250 - 200 = 50, 500 - 100 = 400 us/msg
    assert tls.tls_cost_us(tls_row, plain) == pytest.approx(100.0)
    assert tls.tls_cost_us(tls_row, _row("t/jmspy/jmspy/plain", [])) is None
    tls.note_costs([tls_row, plain])
    assert tls_row.note == "TLS costs +100.0 us/msg" and plain.note == ""


def test_the_summary_puts_each_clients_wires_side_by_side() -> None:
    rows = [c.row for c in tls.configs(_peers(), 100)]
    by_key = {r.key: r for r in rows}
    for wire, rates in (("plain", (10_000.0, 8_000.0)), ("tls", (5_000.0, 5_000.0))):
        by_key[f"t/jmspy/activemq/{wire}"].runs = [{"rate": rates[0]}]
        by_key[f"t/raw/activemq/{wire}"].runs = [{"rate": rates[1]}]
        by_key[f"t/jmspy/activemq/{wire}"].ratios = [rates[0] / rates[1]]
    lines = tls.summary(rows).splitlines()
    assert "| ActiveMQ 5 | jmspy | 10,000 | 5,000 | +100.0 | 1.25x | 1.00x |" in lines
    assert "| ActiveMQ 5 | raw stomp.py | 8,000 | 5,000 | +75.0 |  |  |" in lines
    assert "| Mosquitto | raw paho | - | - | - |  |  |" in lines
    assert "vs raw stomp.py over TLS: 1.00x >= 1x ok" in report.goals_text(
        by_key["t/jmspy/activemq/tls"], by_key)
