"""What attacks on ``jmspy broker`` cost a good client (issue 11, items 5 and 7):
``python -m benchmarks.security_attacks [--quick]``.

Starts ``jmspy broker`` (security on, default PBKDF2 cost) on a free loopback port and
measures a connected good client's SEND-with-receipt round trip (p50/p95) at rest, then
while 20 threads each try 10 wrong passwords, then while 600 connections trickle a CONNECT
one byte a second and 600 stay silent (with the default connect-timeout of 10 s,
max-connections of 1000 and max-connections-per-address of 100: all of them come from
127.0.0.1): how many were refused at once, how many the broker closed and after how long.
Times, so machine noise applies; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

CONFIG = """
[broker]
host = "127.0.0.1"
port = {port}
[security]
enabled = true
[security.users.good]
password = "good-pw"
roles = ["r"]
[security.users.victim]
password = "victim-pw"
roles = ["r"]
[[security.permissions]]
match = "#"
send = ["r"]
consume = ["r"]
"""


NO_THROTTLE = """
[limits]
login-delay-after = 1000000
login-refuse-after = 0
login-address-refuse-after = 0
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def read_frame(sock: socket.socket) -> bytes:
    data = b""
    while b"\0" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    return data


def connect(port: int, user: str, password: str) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"CONNECT\naccept-version:1.2\nhost:/\nlogin:{user}\npasscode:{password}\n"
                 "\n\0".encode())
    return sock, read_frame(sock)


def round_trips(sock: socket.socket, count: int, pause: float = 0.005) -> list[float]:
    times = []
    for i in range(count):
        start = time.perf_counter()
        sock.sendall(f"SEND\ndestination:/queue/rt\nreceipt:{i}\n\nx\0".encode())
        read_frame(sock)
        times.append(time.perf_counter() - start)
        time.sleep(pause)  # paces the good client: it samples the broker over time
    return times


def show(label: str, times: list[float]) -> None:
    ms = sorted(t * 1000 for t in times)
    p95 = ms[int(len(ms) * 0.95) - 1]
    print(f"  {label:<44} p50 {statistics.median(ms):7.2f} ms   p95 {p95:7.2f} ms")


def login_attack(port: int, threads: int, tries: int, results: list[bytes]) -> None:
    def guess() -> None:
        for _ in range(tries):
            try:
                sock, reply = connect(port, "victim", "wrong")
                results.append(reply.split(b"\n", 2)[1])
                sock.close()
            except OSError as exc:
                results.append(str(exc).encode())

    workers = [threading.Thread(target=guess) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def slow_connections(port: int, trickle: int, silent: int, seconds: float) -> None:
    socks: list[tuple[socket.socket, bool]] = []
    opened = time.monotonic()
    for i in range(trickle + silent):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        socks.append((s, i < trickle))
    ended: dict[int, tuple[str, float]] = {}
    payload = b"CONNECT\naccept-version:1.2\nhost:/\n\n\0"
    step = 0
    while time.monotonic() - opened < seconds and len(ended) < len(socks):
        for i, (s, trickles) in enumerate(socks):
            if i in ended:
                continue
            try:
                if trickles and step < len(payload):
                    s.send(payload[step:step + 1])
                data = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            except OSError:  # not connected yet: still in the listen backlog
                continue
            why = ("refused: too many connections" if b"too many connections" in data else
                   "ERROR: CONNECT timeout" if b"CONNECT timeout" in data else "closed")
            ended[i] = (why, time.monotonic() - opened)
        step += 1
        time.sleep(1.0)  # one byte a second per trickling connection
    print(f"  {trickle} trickling + {silent} silent connections "
          f"(connect-timeout 10 s, max-connections 1000, 100 per address):")
    for why in sorted({w for w, _ in ended.values()}):
        times = [t for w, t in ended.values() if w == why]
        print(f"    {why:<32} {len(times):5}  after {min(times):5.1f}-{max(times):5.1f} s")
    print(f"    {'still open after ' + format(seconds, '.0f') + ' s':<32} "
          f"{len(socks) - len(ended):5}")
    for s, _ in socks:
        s.close()


def run_broker(config: str, body: Callable[[int], None]) -> None:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "broker.toml"
        conf.write_text(config.format(port=port))
        proc = subprocess.Popen([sys.executable, "-m", "jmspy", "broker", "--config",
                                 str(conf), "--in-memory"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            assert proc.stdout is not None
            print(proc.stdout.readline().decode().strip())
            body(port)
        finally:
            proc.terminate()
            proc.wait(10)


def login_flood(port: int, samples: int) -> None:
    start = time.perf_counter()
    good, reply = connect(port, "good", "good-pw")
    answer = reply.split(b"\n")[0].decode()
    print(f"  one good login (PBKDF2, default cost): "
          f"{(time.perf_counter() - start) * 1000:.1f} ms ({answer})")
    show("good client at rest", round_trips(good, samples))
    replies: list[bytes] = []
    attack = threading.Thread(target=login_attack, args=(port, 20, 10, replies))
    attack.start()
    during = []
    while attack.is_alive():
        during += round_trips(good, 20)
    attack.join()
    show("good client during 20 x 10 wrong passwords", during)
    for kind in sorted(set(replies)):
        print(f"    attack reply {kind.decode()[:70]!r}: {replies.count(kind)}")
    good.close()


def slow_flood(port: int) -> None:
    good, _ = connect(port, "good", "good-pw")
    attack = threading.Thread(target=slow_connections, args=(port, 600, 600, 25.0))
    attack.start()
    slow = []
    while attack.is_alive():
        slow += round_trips(good, 20)
    show("good client during 1200 slow connections", slow)
    good.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    samples = 100 if args.quick else 400
    print("1. login flood, default throttle (per address and user: delay after 3 failures, "
          "refuse after 10; per address: refuse after 30):")
    run_broker(CONFIG, lambda port: login_flood(port, samples))
    print("2. login flood, throttle off: every guess is hashed, on the login thread:")
    run_broker(CONFIG + NO_THROTTLE, lambda port: login_flood(port, samples))
    print("3. slow and silent connections:")
    run_broker(CONFIG, slow_flood)


if __name__ == "__main__":
    main()
