"""(d) What a broker keeps in RAM per idle MQTT connection: the bundled broker's MQTT host
beside Mosquitto (issue 51).

``python -m benchmarks.mqtt_connections [--count 2000] [--runs 3]``. Each run starts a
fresh broker (``jmspy broker --mqtt-port``, as installed: uvloop, in memory; and Debian's
Mosquitto), opens 100 connections to warm it up, reads its RSS (``/proc/<pid>/status``),
opens ``count`` more, each a plain socket that sends an MQTT 5 CONNECT (clean start, no
keep-alive, its own client id) and reads the CONNACK, and reads the RSS again: the
difference over ``count``, in KB, medians of the runs. The sockets are this process's
own (no client library, no thread per connection), so the figure is the broker's alone.
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import struct
from collections.abc import Callable, Sequence
from typing import Any

from .broker_probe import rss_kb
from .peers import _interop, start_jmspy_mqtt

WARM = 100


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("!H", len(data)) + data


def connect_packet(client_id: str) -> bytes:
    """An MQTT 5 CONNECT: clean start, keep-alive 0, no properties."""
    body = _string("MQTT") + bytes([5, 0x02]) + struct.pack("!H", 0) + b"\x00"
    body += _string(client_id)
    length, encoded = len(body), b""
    while True:
        byte, length = length % 128, length // 128
        encoded += bytes([byte | (0x80 if length else 0)])
        if not length:
            break
    return b"\x10" + encoded + body


def _open(host: str, port: int, count: int, prefix: str) -> list[socket.socket]:
    out = []
    for i in range(count):
        sock = socket.create_connection((host, port), timeout=30)
        sock.sendall(connect_packet(f"{prefix}-{i}"))
        answer = sock.recv(64)
        if not answer or answer[0] >> 4 != 2:  # CONNACK
            raise RuntimeError(f"connection {i}: no CONNACK (got {answer[:8]!r})")
        out.append(sock)
    return out


def measure(start: Callable[[], Any], count: int) -> float:
    """KB of the broker's RSS per idle MQTT connection, one fresh broker."""
    broker = start()
    socks: list[socket.socket] = []
    try:
        socks += _open(broker.host, broker.mqtt_port, WARM, "warm")
        before = rss_kb(broker.proc.pid)
        socks += _open(broker.host, broker.mqtt_port, count, "idle")
        after = rss_kb(broker.proc.pid)
    finally:
        for sock in socks:
            sock.close()
        broker.stop()
    return (after - before) / count


def _room_for(count: int) -> None:
    """This process (and the brokers it starts) may hold ``count`` sockets and more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + WARM + 256
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise SystemExit(f"{count} connections need {want} open files; the hard limit "
                             f"is {hard}: lower --count or raise it (ulimit -Hn)")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mqtt_connections",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=2_000, help="idle connections per run")
    parser.add_argument("--runs", type=int, default=3, help="fresh brokers per figure")
    args = parser.parse_args(argv)
    _room_for(args.count)
    brokers: dict[str, Callable[[], Any]] = {
        "jmspy broker (MQTT host)": start_jmspy_mqtt,
        "Mosquitto": lambda: _interop().Mosquitto().start(),
    }
    figures: dict[str, list[float]] = {name: [] for name in brokers}
    for _ in range(args.runs):  # interleaved: the machine's state is the same for both
        for name, start in brokers.items():
            figures[name].append(measure(start, args.count))
    print(f"RSS per idle MQTT 5 connection, {args.count:,} connections, "
          f"median of {args.runs} fresh brokers")
    for name, values in figures.items():
        shown = ", ".join(f"{v:.1f}" for v in values)
        print(f"  {name:<26} {statistics.median(values):6.1f} KB   (runs: {shown})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
