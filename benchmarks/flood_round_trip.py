"""(c) Round trip of a second connection during a persistent flood: is one connection's
flood of SENDs fair to the others?

One connection (the *flooder*, its own process) writes ``count`` persistent SENDs as fast
as the broker reads them, with no receipt but on the last one; meanwhile a second
connection (the *prober*) sends one persistent SEND with a receipt at a time, to another
queue, and times each SEND to its RECEIPT. The row's p50/p99 are the prober's round trips
while the flood lasts (from the flooder's first write to its last RECEIPT), its msgs/s is
the flood's rate, so a broker cannot look fair by starving the flooder instead. Afterwards
both queues are drained and counted: a run that lost a message is an error, not a figure.

Raw STOMP 1.2 over sockets, frames built once, on ``jmspy broker --data-dir`` and ActiveMQ 5
with KahaDB (both fsync before a persistent RECEIPT). Goals (issue 43): p50 <= 5 ms, and no
worse than ActiveMQ's of the same round. ``python -m benchmarks.flood_round_trip [--runs
3] [--count 50000]`` runs just these rows; part (c) includes them.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from .common import (
    Config,
    Goal,
    Progress,
    Row,
    Spec,
    latency_metrics,
    neutral_dir,
    now,
    run_interleaved,
    run_worker,
    worker_cmd,
    worker_env,
    worker_main,
)
from .peers import Peers

__all__ = ["BROKERS", "configs", "main"]

#: (peer, label): the persistent jmspy broker and the persistent ActiveMQ
BROKERS = (("jmspy-persistent", "jmspy broker --data-dir (uvloop)"),
           ("activemq-kahadb", "ActiveMQ 5 (KahaDB)"))
COUNT, QUICK_COUNT = 50_000, 10_000
_CHUNK = 500  # SENDs per write of the flooder
_BODY = b"x" * 100


def _connect(spec: Spec) -> socket.socket:
    sock = socket.create_connection((spec["host"], spec["port"]), timeout=spec["timeout"])
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\0")
    reply = _Frames(sock).next()
    if not reply.startswith(b"CONNECTED"):
        raise RuntimeError(f"CONNECT refused: {reply[:200]!r}")
    return sock


class _Frames:
    """The frames a socket reads, one at a time (split on NUL: no body here holds one)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.frames: list[bytes] = []

    def next(self) -> bytes:
        while not self.frames:
            data = self.sock.recv(1 << 16)
            if not data:
                raise RuntimeError("the broker closed the connection")
            *done, self.buf = (self.buf + data).split(b"\0")
            self.frames = [f.lstrip(b"\r\n") for f in done if f.strip(b"\r\n")]
        frame = self.frames.pop(0)
        if frame.startswith(b"ERROR"):
            raise RuntimeError(f"the broker answered ERROR: {frame[:300]!r}")
        return frame


def _send(dest: str, receipt: str | None = None) -> bytes:
    head = b"SEND\ndestination:" + dest.encode() + b"\npersistent:true\n"
    if receipt is not None:
        head += b"receipt:" + receipt.encode() + b"\n"
    return head + b"\n" + _BODY + b"\0"


def flooder(spec: Spec) -> dict[str, Any]:
    """Worker: connect, say READY, wait for ``go`` on stdin, flood; FLOODING after the
    first write, then the flood's end time once its last RECEIPT is in."""
    sock = _connect(spec)
    count = spec["count"]
    chunk = _send(spec["dest"]) * _CHUNK
    rest = count % _CHUNK or _CHUNK
    last = _send(spec["dest"]) * (rest - 1) + _send(spec["dest"], "flood-done")
    print("READY", flush=True)
    sys.stdin.readline()
    t_start = now()
    for i in range((count - rest) // _CHUNK):
        sock.sendall(chunk)
        if i == 0:
            print("FLOODING", flush=True)
    sock.sendall(last)
    if count <= _CHUNK:
        print("FLOODING", flush=True)
    receipt = _Frames(sock).next()
    if b"receipt-id:flood-done" not in receipt:
        raise RuntimeError(f"expected the flood's RECEIPT, got {receipt[:200]!r}")
    t_end = now()
    sock.close()
    return {"t_start": t_start, "t_end": t_end}


def _drain(spec: Spec, dest: str, expect: int) -> int:
    """Consume ``dest`` (``ack:auto``) until ``expect`` messages came or none for a while."""
    sock = _connect(spec)
    sock.sendall(f"SUBSCRIBE\nid:d\ndestination:{dest}\nack:auto\nactivemq.prefetchSize:1000"
                 f"\nprefetch-count:1000\n\n\0".encode())
    frames, got = _Frames(sock), 0
    sock.settimeout(10)  # a drained queue: nothing more within 10 s
    try:
        while got < expect:
            if frames.next().startswith(b"MESSAGE"):
                got += 1
    except TimeoutError:
        pass
    sock.close()
    return got


def prober(spec: Spec) -> dict[str, Any]:
    """Worker: start the flooder, time one receipted SEND after another while it floods,
    then drain and count both queues."""
    tag = uuid.uuid4().hex[:8]
    flood_q, probe_q = f"/queue/flood-{tag}", f"/queue/probe-{tag}"
    child = subprocess.Popen(worker_cmd("flood_round_trip", {**spec, "role": "flooder",
                                                             "dest": flood_q}),
                             env=worker_env(), cwd=neutral_dir(), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        if child.stdout.readline().strip() != "READY":
            return {"error": f"the flooder did not connect: {child.communicate()[1][-300:]}"}
        sock = _connect(spec)
        frames = _Frames(sock)
        flooding, done = threading.Event(), threading.Event()
        lines: list[str] = []

        def watch() -> None:  # the flooder's FLOODING, then its result line
            assert child.stdout is not None
            for line in child.stdout:
                lines.append(line)
                flooding.set()
                if line.startswith("{"):
                    break
            flooding.set()
            done.set()

        child.stdin.write("go\n")
        child.stdin.flush()
        threading.Thread(target=watch, daemon=True).start()
        flooding.wait(spec["timeout"])  # its first write is out: the flood is on
        rtts: list[float] = []
        i = 0
        while not done.is_set():
            i += 1
            sent = now()
            sock.sendall(_send(probe_q, f"p{i}"))
            if b"receipt-id:p%d" % i not in frames.next():
                return {"error": f"probe {i}: not its RECEIPT"}
            rtts.append(now() - sent)
        sock.close()
        child.wait(spec["timeout"])
        result = next((ln for ln in lines if ln.startswith("{")), "")
        if not result or '"error"' in result:
            err = child.stderr.read() if child.stderr is not None else ""
            return {"error": f"flooder: {result.strip() or err[-300:]}"}
        flood = json.loads(result)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    count = spec["count"]
    flooded, probed = _drain(spec, flood_q, count), _drain(spec, probe_q, len(rtts))
    if flooded != count or probed != len(rtts):
        return {"error": f"lost messages: drained {flooded:,} of {count:,} flood messages "
                         f"and {probed:,} of {len(rtts):,} probes"}
    elapsed = flood["t_end"] - flood["t_start"]
    return {"rate": count / elapsed, "probes": len(rtts), **latency_metrics(rtts)}


def _runner(peers: Peers, broker: str, count: int) -> Any:
    def run(_rnd: int) -> dict[str, Any]:
        ep = peers.get(broker)
        if isinstance(ep, str):
            return {"error": ep}
        return run_worker("flood_round_trip", {
            "role": "prober", "host": ep.host, "port": ep.stomp_port, "count": count,
            "timeout": 120}, timeout=600)

    return run


def configs(quick: bool, peers: Peers, count: int | None = None) -> list[Config]:
    count = count or (QUICK_COUNT if quick else COUNT)
    config = (f"STOMP 1.2, a second connection's persistent SEND+RECEIPT while the first "
              f"sends {count:,} persistent msgs without receipts")
    out = []
    other = f"c/{BROKERS[1][0]}/flood-round-trip"
    for broker, label in BROKERS:
        row = Row("c", f"c/{broker}/flood-round-trip", f"round trip during a flood -> {label}",
                  config, short="round trip during a flood")
        if broker == BROKERS[0][0]:
            row.goals = [
                Goal(5.0, metric="p50_ms", at_most=True, unit="ms", label="p50", issue=43),
                Goal(1.0, over=other, metric="p50_ms", at_most=True,
                     label="p50 vs ActiveMQ", issue=43)]
        row.note = "msgs/s: the flood's; p50/p99: the second connection's round trips"
        out.append(Config(row, _runner(peers, broker, count)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from . import report

    ap = argparse.ArgumentParser(prog="python -m benchmarks.flood_round_trip",
                                 description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--count", type=int, default=COUNT, help="persistent SENDs of the flood")
    args = ap.parse_args(argv)
    progress = Progress(len(BROKERS) * args.runs)
    with Peers(log=progress.log) as peers:
        cfgs = configs(False, peers, args.count)
        rows = run_interleaved(cfgs, args.runs, progress)
    progress.close()
    for row in rows:
        probes = [r["probes"] for r in row.runs if "probes" in r]
        if probes:
            row.note += f"; probes per run: {', '.join(f'{p:,.0f}' for p in probes)}"
    print(report.table(rows, args.runs))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("{"):  # a worker's JSON spec
        worker_main({"flooder": flooder, "prober": prober})
    else:
        raise SystemExit(main())
