"""Massive queues (seed 002): broker RSS with 1M queued persistent 1 KB messages, restart to
first delivery with them queued (ActiveMQ 5 with KahaDB beside it), and draining the
paged queue against draining one held in RAM.

``python -m benchmarks.massive_queue [--count 1000000] [--runs 3]``. Producers and consumers
are raw STOMP over a socket (pre-built frames, so the client costs nothing next to the
broker); every broker runs in its own process on a loopback port chosen at run time.

Rows (goals from the persistence issue):

* RSS at ``count`` minus RSS at ``count/10`` queued, ``jmspy broker`` at its default 64 MB
  memory limit: under 16 MB (the queue pages out; the index is on disk).
* Restart to first delivery with ``count`` queued: ``jmspy broker`` started on the data
  directory of a killed one (``kill -9``) until a consumer has its first message, at most
  2 s; ActiveMQ 5 (KahaDB) restarted with the same backlog, for comparison.
* Drain rate of the paged queue (after that restart) over a queue of the same depth held
  in RAM (``memory-limit`` large enough), both on a persistent broker with ``ack:auto``,
  300k messages each: at least 0.8x. Medians over ``--runs``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .broker_probe import rss_kb
from .common import neutral_dir, worker_env
from .peers import _interop

BODY = b"x" * 1024
DEST = "/queue/massive"


class Stomp:
    """A bare STOMP 1.2 connection: frames written as bytes, MESSAGE frames counted."""

    def __init__(self, port: int, timeout: float = 60.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\0")
        self.read_until(b"CONNECTED")

    def read_until(self, marker: bytes) -> None:
        while marker not in self.buf:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError(f"broker closed the connection waiting for {marker!r}")
            self.buf += data
        self.buf = self.buf[self.buf.index(marker) + len(marker):]

    def flood(self, count: int, persistent: bool = True) -> None:
        """SEND ``count`` messages, a receipt every 5,000 (so the socket never holds more)."""
        head = (f"SEND\ndestination:{DEST}\npersistent:{'true' if persistent else 'false'}\n"
                f"content-length:{len(BODY)}\n").encode()
        frame = head + b"\n" + BODY + b"\0"
        sent = 0
        while sent < count:
            n = min(5000, count - sent)
            receipt = f"receipt:r{sent + n}\n".encode()
            self.sock.sendall(frame * (n - 1) + head + receipt + b"\n" + BODY + b"\0")
            self.read_until(f"receipt-id:r{sent + n}".encode())
            sent += n

    def subscribe(self, ack: str, prefetch: int) -> None:
        self.sock.sendall(f"SUBSCRIBE\nid:1\ndestination:{DEST}\nack:{ack}\n"
                          f"activemq.prefetchSize:{prefetch}\n\n\0".encode())

    def count_messages(self, count: int) -> None:
        got = 0
        tail = b""
        while got < count:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError(f"broker closed the connection after {got} messages")
            chunk = tail + data
            got += chunk.count(b"MESSAGE\n")
            tail = chunk[-7:]

    def close(self) -> None:
        self.sock.close()


class JmspyBroker:
    def __init__(self, data: Path, memory_limit: str | None = None) -> None:
        self.data = data
        self.port = _interop().free_port()
        self.config = None
        if memory_limit is not None:
            self.config = data.parent / f"{data.name}.toml"
            self.config.write_text(f'[system-usage]\nmemory-limit = "{memory_limit}"\n')
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start; returns the monotonic time of the spawn."""
        cmd = [sys.executable, "-m", "jmspy", "broker", "--host", "127.0.0.1", "--port",
               str(self.port), "--data-dir", str(self.data)]
        if self.config is not None:
            cmd += ["--config", str(self.config)]
        began = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=worker_env(), cwd=neutral_dir(), start_new_session=True)
        return began

    def connect(self, deadline: float) -> Stomp:
        while True:
            try:
                return Stomp(self.port)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)  # the broker is not listening yet

    def kill(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None


def first_delivery(connect: Any, began: float) -> float:
    """Seconds from ``began`` until a consumer (connecting as soon as it can) has a message."""
    conn = connect(time.monotonic() + 120)
    conn.subscribe("client-individual", 1)
    conn.count_messages(1)
    elapsed = time.monotonic() - began
    conn.close()
    return elapsed


def drain_rate(broker: JmspyBroker, count: int) -> float:
    conn = broker.connect(time.monotonic() + 60)
    began = time.monotonic()
    conn.subscribe("auto", 1000)
    conn.count_messages(count)
    rate = count / (time.monotonic() - began)
    conn.close()
    return rate


def jmspy_rows(count: int, log: Any) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="jmspy-bench-massive-"))
    out: dict[str, float] = {}
    broker = JmspyBroker(work / "paged")
    broker.start()
    conn = broker.connect(time.monotonic() + 60)
    assert broker.proc is not None
    base = rss_kb(broker.proc.pid)
    conn.flood(count // 10)
    tenth = rss_kb(broker.proc.pid)
    conn.flood(count - count // 10)
    full = rss_kb(broker.proc.pid)
    conn.close()
    out["rss_start_mb"] = base / 1024
    out["rss_tenth_mb"] = tenth / 1024
    out["rss_full_mb"] = full / 1024
    out["rss_growth_mb"] = (full - tenth) / 1024
    log(f"jmspy RSS: start {base / 1024:.1f} MB, {count // 10:,} queued {tenth / 1024:.1f} MB, "
        f"{count:,} queued {full / 1024:.1f} MB: growth {(full - tenth) / 1024:.1f} MB")
    broker.kill()
    began = broker.start()
    out["restart_s"] = first_delivery(broker.connect, began)
    log(f"jmspy restart to first delivery with {count:,} queued: {out['restart_s']:.2f} s")
    drain = min(count - 10, 300_000)
    out["paged_drain"] = drain_rate(broker, drain)
    broker.kill()
    # the same depth held in RAM (a memory limit above what it takes), so that both
    # drains delete from a store of the same size: only paging differs
    ram = JmspyBroker(work / "ram", memory_limit="16 GB")
    ram.start()
    conn = ram.connect(time.monotonic() + 60)
    conn.flood(count)
    conn.close()
    out["ram_drain"] = drain_rate(ram, drain)
    ram.kill()
    log(f"drain {drain:,}: paged {out['paged_drain']:,.0f}/s, in RAM {out['ram_drain']:,.0f}/s"
        f" = {out['paged_drain'] / out['ram_drain']:.2f}x")
    subprocess.run(["rm", "-rf", str(work)], check=False)
    return out


def activemq_restart(count: int, log: Any) -> float:
    amq = _interop().ActiveMQ(persistent=True)
    try:
        amq.start()
        conn = Stomp(amq.stomp_port)
        conn.flood(count)
        conn.close()
        amq.stop()  # TERM: ActiveMQ flushes KahaDB's index (a kill would make it rebuild)
        began = time.monotonic()
        amq.start()
        elapsed = first_delivery(lambda deadline: Stomp(amq.stomp_port), began)
        log(f"ActiveMQ 5 (KahaDB) restart to first delivery with {count:,} queued: "
            f"{elapsed:.2f} s")
        return elapsed
    finally:
        amq.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.massive_queue")
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-activemq", action="store_true")
    args = parser.parse_args(argv)
    runs = [jmspy_rows(args.count, print) for _ in range(args.runs)]

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    amq = None if args.no_activemq else activemq_restart(args.count, print)
    ratio = statistics.median(r["paged_drain"] / r["ram_drain"] for r in runs)
    print(f"\nmedians of {args.runs} runs, {args.count:,} queued 1 KB persistent messages:")
    print(f"  RSS growth {args.count // 10:,} -> {args.count:,} queued: "
          f"{med('rss_growth_mb'):.1f} MB (goal < 16 MB; RSS at {args.count:,}: "
          f"{med('rss_full_mb'):.0f} MB)")
    print(f"  restart to first delivery: {med('restart_s'):.2f} s (goal <= 2 s)"
          + ("" if amq is None else f"; ActiveMQ 5 KahaDB {amq:.2f} s"))
    print(f"  drain paged / drain in RAM: {ratio:.2f}x (goal >= 0.8x; "
          f"{med('paged_drain'):,.0f}/s vs {med('ram_drain'):,.0f}/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
