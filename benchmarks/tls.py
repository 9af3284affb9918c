"""(t) TLS: jmspy over TLS against the raw clients over TLS, and what TLS costs per
message: ``python -m benchmarks.tls [--runs 5] [--count 5000]``.

In one run, interleaved round by round, on the same brokers, each pair measured twice,
over TLS and over plain TCP:

* STOMP: jmspy (``stomp+ssl://``) against raw stomp.py (``set_ssl``) on ``jmspy broker``
  (its TLS listener, ``[broker.tls]``), ActiveMQ 5 (a ``stomp+ssl://`` connector) and
  RabbitMQ (its STOMP TLS listener, which requires a client certificate: both clients
  present one there). Part (b)'s pair (benchmarks/part_b_stomp_client.py's specs),
  window 1000, 100 B non-persistent messages, with automatic acknowledgement (raw
  stomp.py ``ack:auto``, jmspy AUTO_ACKNOWLEDGE), not part (b)'s client acknowledgement:
  raw stomp.py 9 over TLS stalls when its listener sends the ACKs (283 of 500 messages
  arrived, then nothing), which jmspy over stomp+ssl:// does not. Over TLS raw
  stomp.py's producer also waits for its DISCONNECT's receipt before it exits: stomp.py
  writes TLS from a queue on its I/O thread, and leaving at once lost queued SENDs.
* MQTT: jmspy (``mqtts://``) against raw paho (``tls_set``) on Mosquitto: part (d)'s
  ``window`` pair, MQTT 5, QoS 1, 100 PUBLISHes in flight (benchmarks/part_d_mqtt.py's
  workers).

The brokers and the throwaway CA come from the interop tests' recipes
(tests/interop/tls_brokers.py, tests/tls_ca.py), on free loopback ports. Both clients
verify the broker's certificate against that CA (no client skips verification).

Goal (issue 47): jmspy / raw over TLS >= 1.0x on each broker, as on plain sockets. The
TLS cost per message is stated in each TLS row's note: the median over rounds of
1/rate(TLS) - 1/rate(plain), in microseconds of wall time per message (same client, same
broker, same round).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import report
from .common import (
    Config,
    Goal,
    Progress,
    Row,
    Spec,
    median,
    neutral_dir,
    run_interleaved,
    run_pair,
    worker_env,
)
from .part_b_stomp_client import stomp_specs
from .part_d_mqtt import WINDOW
from .peers import Endpoint

_TESTS = Path(__file__).resolve().parent.parent / "tests"
STOMP_BROKERS = ("jmspy", "activemq", "rabbitmq")
CLIENTS = ("jmspy", "raw")
WIRES = ("tls", "plain")
LABEL = {"jmspy": "jmspy broker (uvloop)", "activemq": "ActiveMQ 5", "rabbitmq": "RabbitMQ",
         "mosquitto": "Mosquitto"}


@dataclass
class TlsPeer:
    """A broker with a plain and a TLS port for one protocol."""

    name: str
    host: str
    plain_port: int
    tls_port: int
    #: the TLS port requires a client certificate (RabbitMQ's listeners)
    mutual: bool = False


@dataclass
class Peers:
    """Starts each TLS broker on first use (a failure is remembered as its reason) and
    stops them all at the end. ``files``: the CA's TlsFiles."""

    files: Any
    _started: dict[str, TlsPeer | str] = field(default_factory=dict)
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def get(self, name: str) -> TlsPeer | str:
        if name not in self._started:
            try:
                self._started[name] = _START[name](self)
            except Exception as exc:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self._started[name] = f"{name} could not start: {first}"
        return self._started[name]

    def close(self) -> None:
        for close in reversed(self._closers):
            try:
                close()
            except Exception:
                pass  # stopping what remains matters more
        self._closers.clear()


def _interop() -> tuple[Any, Any, Any]:
    """tests/interop/brokers.py, tls_brokers.py and tests/tls_ca.py (they import each
    other by name, as the tests run them)."""
    for path in (_TESTS / "interop", _TESTS):
        if not path.is_dir():
            raise RuntimeError(f"{path} not found (run from a source checkout)")
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    import brokers  # type: ignore[import-not-found]
    import tls_brokers  # type: ignore[import-not-found]
    import tls_ca  # type: ignore[import-not-found]

    return brokers, tls_brokers, tls_ca


def _start_jmspy(peers: Peers) -> TlsPeer:
    """``python -m jmspy broker`` in memory on its default loop (uvloop where installed),
    a plain and a TLS listener (``[broker.tls]`` with the CA's server certificate)."""
    brokers, _, _ = _interop()
    work = Path(tempfile.mkdtemp(prefix="jmspy-bench-tls-"))
    conf = work / "broker.toml"
    conf.write_text(f'[broker.tls]\ncert = "{peers.files.server_cert}"\n'
                    f'key = "{peers.files.server_key}"\n', encoding="utf-8")
    port, tls_port = brokers.free_port(), brokers.free_port()
    loop = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
    log = work / "broker.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jmspy", "broker", "--config", str(conf), "--host",
             brokers.HOST, "--port", str(port), "--tls-port", str(tls_port), "--in-memory",
             "--loop", loop], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=worker_env(), cwd=neutral_dir(), start_new_session=True)
    broker = brokers.BrokerProcess("jmspy-tls", brokers.HOST, port, None, proc, work, log)
    peers._closers.append(broker.stop)
    broker.wait_ready([port, tls_port], 30)
    return TlsPeer("jmspy", brokers.HOST, port, tls_port)


def _start_activemq(peers: Peers) -> TlsPeer:
    _, tls_brokers, _ = _interop()
    amq = tls_brokers.start_tls_activemq(peers.files)
    peers._closers.append(amq.close)
    return TlsPeer("activemq", amq.host, amq.stomp_port, amq.stomp_tls_port)


def _start_rabbitmq(peers: Peers) -> TlsPeer:
    _, tls_brokers, _ = _interop()
    rabbit = tls_brokers.start_tls_rabbitmq(peers.files)
    peers._closers.append(rabbit.close)
    return TlsPeer("rabbitmq", rabbit.host, rabbit.stomp_port, rabbit.stomp_tls_port,
                   mutual=True)


def _start_mosquitto(peers: Peers) -> TlsPeer:
    brokers, tls_brokers, _ = _interop()
    mosquitto, ports = tls_brokers.start_tls_mosquitto(peers.files)
    peers._closers.append(mosquitto.close)
    return TlsPeer("mosquitto", brokers.HOST, ports.plain_port, ports.tls_port)


_START: dict[str, Callable[[Peers], TlsPeer]] = {
    "jmspy": _start_jmspy, "activemq": _start_activemq, "rabbitmq": _start_rabbitmq,
    "mosquitto": _start_mosquitto,
}


# -- the specs of one run ----------------------------------------------------------------
def _tls_files(peer: TlsPeer, files: Any) -> dict[str, str | None]:
    """The raw clients' TLS settings: the CA, and alice's certificate where required."""
    mutual = peer.mutual
    return {"ca": str(files.ca), "cert": str(files.client_cert) if mutual else None,
            "key": str(files.client_key) if mutual else None}


def _jmspy_query(peer: TlsPeer, files: Any) -> str:
    tls = _tls_files(peer, files)
    query = f"ca_file={tls['ca']}"
    if tls["cert"]:
        query += f"&cert_file={tls['cert']}&key_file={tls['key']}"
    return query


def stomp_pair(peer: TlsPeer, files: Any, client: str, wire: str, count: int
               ) -> tuple[Spec, Spec]:
    """(consumer, producer) specs: part (b)'s window-1000 pair, over TLS or plain."""
    tls = wire == "tls"
    port = peer.tls_port if tls else peer.plain_port
    ep = Endpoint(peer.name, peer.host, port, None)
    consumer, producer = stomp_specs(ep, client, "auto", 1000, count)
    if tls:
        for spec in (consumer, producer):
            if client == "jmspy":
                spec["url"] = (spec["url"].replace("stomp://", "stomp+ssl://", 1)
                               + "&" + _jmspy_query(peer, files))
            else:
                spec["tls"] = _tls_files(peer, files)
    return consumer, producer


def mqtt_pair(peer: TlsPeer, files: Any, client: str, wire: str, count: int
              ) -> tuple[Spec, Spec]:
    """(consumer, producer) specs: part (d)'s ``window`` pair (MQTT 5), over TLS or
    plain."""
    tls = wire == "tls"
    port = peer.tls_port if tls else peer.plain_port
    base: Spec = {"host": peer.host, "port": port, "count": count, "timeout": 180,
                  "version": "5", "mode": "window", "inflight": WINDOW,
                  "dest": f"bench/{uuid.uuid4().hex[:12]}"}
    if client == "jmspy":
        scheme = "mqtts" if tls else "mqtt"
        query = "&" + _jmspy_query(peer, files) if tls else ""
        base["url"] = f"{scheme}://{peer.host}:{port}?version=5{query}"
        base["dest"] = base["dest"].replace("/", ".")
    elif tls:
        base["tls"] = _tls_files(peer, files)
    role = "jmspy" if client == "jmspy" else "paho"
    return {**base, "role": f"{role}-consumer"}, {**base, "role": f"{role}-producer"}


# -- rows --------------------------------------------------------------------------------
def key(client: str, broker: str, wire: str) -> str:
    return f"t/{client}/{broker}/{wire}"


def _runner(peers: Peers, broker: str, client: str, wire: str, count: int
            ) -> Callable[[int], dict[str, Any]]:
    def run(_rnd: int) -> dict[str, Any]:
        peer = peers.get(broker)
        if isinstance(peer, str):
            return {"error": peer}
        if broker == "mosquitto":
            return run_pair("part_d_mqtt", *mqtt_pair(peer, peers.files, client, wire, count))
        return run_pair("workers", *stomp_pair(peer, peers.files, client, wire, count))

    return run


def configs(peers: Peers, count: int) -> list[Config]:
    out: list[Config] = []
    for broker in (*STOMP_BROKERS, "mosquitto"):
        mqtt = broker == "mosquitto"
        raw = "raw paho" if mqtt else "raw stomp.py"
        what = (f"MQTT 5, QoS 1, {WINDOW} in flight, {count:,} msgs" if mqtt else
                f"auto ack, window 1000, non-persistent, {count:,} msgs")
        for wire in WIRES:
            scheme = ("mqtts://" if mqtt else "stomp+ssl://") if wire == "tls" else (
                "mqtt://" if mqtt else "stomp://")
            for client in CLIENTS:
                name = (f"jmspy {scheme}" if client == "jmspy" else
                        f"{raw} {'over TLS' if wire == 'tls' else 'plain'}")
                row = Row("t", key(client, broker, wire), f"{name} -> {LABEL[broker]}",
                          what + (", TLS" if wire == "tls" else ", plain TCP"),
                          short=f"{LABEL[broker]} {wire}")
                if client == "jmspy":
                    row.baseline = key("raw", broker, wire)
                    if wire == "tls":
                        row.goals = [Goal(1.0, over=row.baseline, label=f"vs {raw} over TLS",
                                          issue=47)]
                out.append(Config(row, _runner(peers, broker, client, wire, count)))
    return out


def tls_cost_us(tls: Row, plain: Row) -> float | None:
    """The median over rounds of 1/rate(TLS) - 1/rate(plain), in microseconds per
    message (run i of each: the same round); None when either was not measured."""
    costs = [(1.0 / a["rate"] - 1.0 / b["rate"]) * 1e6
             for a, b in zip(tls.runs, plain.runs, strict=False)
             if a.get("rate") and b.get("rate")]
    return median(costs) if costs else None


def note_costs(rows: list[Row]) -> None:
    """Add each TLS row's cost per message to its note."""
    by_key = {r.key: r for r in rows}
    for row in rows:
        if not row.key.endswith("/tls"):
            continue
        plain = by_key.get(row.key[: -len("tls")] + "plain")
        cost = None if plain is None else tls_cost_us(row, plain)
        if cost is not None:
            row.note = "; ".join(filter(None, [f"TLS costs {cost:+.1f} us/msg", row.note]))


def summary(rows: list[Row]) -> str:
    """The side-by-side table of benchmarks/README.md: per broker and client, msgs/s
    plain and over TLS, the TLS cost per message, and jmspy / raw on each wire."""
    by_key = {r.key: r for r in rows}
    lines = ["| broker | client | plain msgs/s | TLS msgs/s | TLS cost us/msg | "
             "jmspy / raw, plain | jmspy / raw, TLS |",
             "| --- | --- | --- | --- | --- | --- | --- |"]

    def rate(row: Row | None) -> str:
        return "-" if row is None or not row.runs else f"{row.med('rate'):,.0f}"

    for broker in (*STOMP_BROKERS, "mosquitto"):
        for client in CLIENTS:
            tls, plain = by_key.get(key(client, broker, "tls")), by_key.get(
                key(client, broker, "plain"))
            cost = None if tls is None or plain is None else tls_cost_us(tls, plain)
            ratios = []
            for wire in ("plain", "tls"):
                row = by_key.get(key(client, broker, wire))
                ratio = row.ratio if row is not None and client == "jmspy" else None
                ratios.append(f"{ratio:.2f}x" if ratio is not None else "")
            name = ("jmspy" if client == "jmspy" else
                    "raw paho" if broker == "mosquitto" else "raw stomp.py")
            lines.append(f"| {LABEL[broker]} | {name} | {rate(plain)} | {rate(tls)} | "
                         f"{'-' if cost is None else f'{cost:+.1f}'} | {ratios[0]} | "
                         f"{ratios[1]} |")
    return "\n".join(lines)


@contextmanager
def _peers() -> Iterator[Peers]:
    _, _, tls_ca = _interop()
    files = tls_ca.make_ca(Path(tempfile.mkdtemp(prefix="jmspy-bench-ca-")))
    peers = Peers(files)
    try:
        yield peers
    finally:
        peers.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tls",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="interleaved rounds (medians)")
    ap.add_argument("--count", type=int, default=5000, help="messages per run")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.count < 1:
        ap.error("--runs and --count take numbers >= 1")
    with _peers() as peers:
        cfgs = configs(peers, args.count)
        progress = Progress(len(cfgs) * args.runs)
        rows = run_interleaved(cfgs, args.runs, progress)
        progress.show("stopping brokers")
    progress.close()
    note_costs(rows)
    print(report.table(rows, args.runs))
    print()
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
