"""`jmspy broker --data-dir DIR` keeps its promises across kill -9: a SEND that got its
RECEIPT is delivered after the restart, an ACK that got its RECEIPT is never delivered
again, and what comes back unacknowledged is marked redelivered. One broker per data
directory: a second one refuses to start, naming the directory."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import stomp
from brokers import free_port
from stomp_support import Collector


class Broker:
    """``jmspy broker --data-dir`` as a subprocess that can be killed and started again."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> str:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jmspy", "broker", "--port", str(self.port),
             "--data-dir", str(self.data_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # printed once it listens
        assert line.startswith(f"jmspy broker listening on 127.0.0.1:{self.port}"), (
            line, self.proc.stderr.read() if self.proc.stderr else "")
        return line

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.communicate(timeout=10)

    def connect(self, listener: Collector) -> Any:
        conn = stomp.Connection12([("127.0.0.1", self.port)], heartbeats=(0, 0))
        conn.set_listener("c", listener)
        conn.connect(wait=True, headers={"host": "/"})
        return conn


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "data")
    yield b
    if b.proc is not None and b.proc.poll() is None:
        b.kill()


#: Message numbers each round may use: far more than it can send before the kill, so the
#: broker always dies while SENDs are going out
ROUND = 1_000_000
#: SENDs the producer keeps unconfirmed at most (as persistentSendWindow does)
WINDOW = 100
#: Broker kills, each after 1,500-2,500 more receipts: about 20,000 receipted SENDs in all
KILLS = 10


def _produce(broker: Broker, start: int, confirmed: set[int], stop: threading.Event) -> None:
    """Persistent SENDs with receipts, at most WINDOW unconfirmed, until the broker dies;
    then receipts until ``stop``: ``confirmed`` gets every SEND whose RECEIPT arrived."""
    lst = Collector()

    def collect() -> None:
        with lst.lock:
            confirmed.update(int(rid[1:]) for rid in lst.receipts)
            lst.receipts.clear()

    try:
        conn = broker.connect(lst)
        for i in range(start, start + ROUND):
            while i - start - sum(n >= start for n in list(confirmed)) >= WINDOW:
                if stop.wait(0.001):  # waits for receipts to open the window
                    break
                collect()
            if stop.is_set():
                break
            conn.send("/queue/durable", f"m{i}", headers={"persistent": "true", "n": str(i)},
                      receipt=f"s{i}")
            collect()
    except Exception:  # the broker was killed under us: expected
        pass
    while not stop.wait(0.005):  # waits for the rest of the receipts, until the kill
        collect()
    collect()


def test_receipted_sends_and_acks_survive_kill_9(broker: Broker) -> None:
    assert str(broker.data_dir.resolve()) in broker.start()
    rng = random.Random(7)
    confirmed: set[int] = set()  # SENDs whose RECEIPT came
    acked: set[int] = set()  # ACKs whose RECEIPT came
    next_n = 0
    for _ in range(KILLS):
        stop = threading.Event()
        producer = threading.Thread(target=_produce, args=(broker, next_n, confirmed, stop))
        producer.start()
        # Consume and ack (with receipts) a few while the producer runs.
        lst = Collector()
        conn = broker.connect(lst)
        conn.subscribe("/queue/durable", id="c", ack="client-individual",
                       headers={"jmspy-flow-limit": "5"})
        for i in range(rng.randint(5, 20)):
            frame = lst.wait_messages(i + 1, timeout=30)[i]
            n = int(frame.headers["n"])
            assert n not in acked, "an ACK that got its RECEIPT was delivered again"
            conn.ack(frame.headers["ack"], receipt=f"a{n}")
            lst.wait_receipt(f"a{n}", timeout=30)
            acked.add(n)
        # kill after a few more receipts, while the producer is still sending
        kill_after = sum(n >= next_n for n in list(confirmed)) + rng.randint(1500, 2500)
        deadline = time.monotonic() + 60
        while sum(n >= next_n for n in list(confirmed)) < kill_after:
            assert time.monotonic() < deadline, f"only {len(confirmed)} receipts in 60 s"
            threading.Event().wait(0.001)  # waits for the producer's receipts
        broker.kill()  # anywhere: mid-SEND, mid-commit, mid-ACK
        stop.set()
        producer.join(30)
        next_n += ROUND  # the next round's numbers are new
        broker.start()
    # Drain everything that came back.
    lst = Collector()
    conn = broker.connect(lst)
    conn.subscribe("/queue/durable", id="d", ack="auto")
    expected = confirmed - acked
    seen: set[int] = set()
    deadline = time.monotonic() + 60
    while not expected <= seen and time.monotonic() < deadline:
        threading.Event().wait(0.01)  # waits for the drain's MESSAGE frames
        with lst.lock:
            seen = {int(f.headers["n"]) for f in lst.messages}
    assert len(confirmed) >= KILLS * 1500  # the harness really ran at size
    assert not acked & seen, "an ACK that got its RECEIPT was delivered again"
    assert expected <= seen, f"SENDs that got their RECEIPT were lost: {sorted(expected - seen)}"
    # Everything drained came back through a restart: the broker cannot know whether it
    # was delivered before the crash, so it says redelivered (never the other way round).
    with lst.lock:
        assert all(f.headers.get("redelivered") == "true" for f in lst.messages)
    print(f"\n{len(confirmed)} receipted sends ({len(seen)} recovered), {len(acked)} "
          f"receipted acks over {KILLS} kill -9: 0 lost, 0 redelivered after a receipted ack")
    conn.disconnect()


def test_a_second_broker_on_the_same_data_directory_refuses_to_start(broker: Broker) -> None:
    broker.start()
    other = subprocess.run(
        [sys.executable, "-m", "jmspy", "broker", "--port", str(free_port()),
         "--data-dir", str(broker.data_dir)],
        capture_output=True, text=True, timeout=60)
    assert other.returncode == 2
    assert "in use by another broker" in other.stderr
    assert str(broker.data_dir.resolve()) in other.stderr


def test_a_data_directory_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    out = subprocess.run(
        [sys.executable, "-m", "jmspy", "broker", "--port", str(free_port()),
         "--data-dir", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert f"the data directory {path.resolve()} is a file" in out.stderr


def test_check_verifies_a_store_offline_and_names_damaged_rows(tmp_path: Path) -> None:
    import sqlite3

    from jmspy.broker_ref.core import BodyType, DestinationKind, ServerMessage
    from jmspy.broker_ref.data_dir import DataDirectory

    data = DataDirectory(tmp_path, group_commit=False)
    for mid in ("a", "b"):
        data.store.add_message("orders", ServerMessage(mid, DestinationKind.QUEUE, "orders",
                                                        BodyType.TEXT, "x"))
    data.store.close()
    data.release()

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "jmspy", "broker", "--check",
                               "--data-dir", str(tmp_path)],
                              capture_output=True, text=True, timeout=60)

    ok = check()
    assert ok.returncode == 0, ok.stderr
    assert "  orders: 2 messages" in ok.stdout and "2 messages, 0 durable" in ok.stdout
    db = sqlite3.connect(str(tmp_path / "messages.sqlite"))
    db.execute("UPDATE messages SET data = ? WHERE id = 'b'", (b"{torn",))
    db.commit()
    db.close()
    damaged = check()
    assert damaged.returncode == 1
    assert "DAMAGED: message b of orders" in damaged.stdout
    assert "1 messages, 0 durable subscriptions, 1 damaged rows" in damaged.stdout
