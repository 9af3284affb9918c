"""``jmspy broker`` as a process when its store fails: a full disk refuses sends and the
broker shuts down cleanly on SIGTERM, during the fault or after it (exit 0, no
traceback); a store that became unusable stops the broker for real (listener closed,
non-zero exit, the reason logged) instead of leaving a process that accepts and drops
connections. The full disk is injected at the store's write seam by a wrapper that then
runs ``python -m jmspy`` unchanged, and, where root may mount one, is a real 8 MiB tmpfs.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from brokers import free_port

#: ``python -m jmspy ...`` with every store write and commit failing for space while the
#: file named by the first argument exists
_FAULTY = textwrap.dedent("""
    import errno, os, runpy, sys
    from jmspy.broker_ref.store.store_writes import GroupWrites
    flag = sys.argv.pop(1)
    real = GroupWrites._execute
    def execute(self, sql, params=()):
        if os.path.exists(flag) and sql.startswith(("INSERT", "UPDATE", "DELETE", "COMMIT")):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, sql, params)
    GroupWrites._execute = execute
    sys.argv[0] = "jmspy"
    runpy.run_module("jmspy", run_name="__main__", alter_sys=True)
""")


class Broker:
    def __init__(self, data_dir: Path, flag: Path | None = None) -> None:
        self.port = free_port()
        prefix = [sys.executable, "-c", _FAULTY, str(flag)] if flag else [
            sys.executable, "-m", "jmspy"]
        self.proc = subprocess.Popen(
            [*prefix, "broker", "--port", str(self.port), "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/tmp")
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # printed once it listens
        assert line.startswith("jmspy broker listening"), self.proc.communicate(timeout=30)
        self.clients: list[Client] = []

    def client(self) -> Client:
        c = Client(self.port)
        self.clients.append(c)
        return c

    def close_clients(self) -> None:
        for c in self.clients:
            c.close()
        self.clients.clear()

    def stop(self) -> tuple[int, str]:
        """SIGTERM; the exit code and stderr."""
        self.close_clients()
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err

    def kill(self) -> None:
        self.close_clients()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)


class Client:
    """A blocking STOMP 1.2 client on a plain socket: one frame at a time."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.file = self.sock.makefile("rb")
        self.sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\0")
        assert self.read().startswith(b"CONNECTED")

    def read(self) -> bytes:
        """The next frame (b"" at end of stream)."""
        data = bytearray()
        while (c := self.file.read(1)) not in (b"\0", b""):
            data += c
        return bytes(data).lstrip(b"\n")

    def send(self, queue: str, body: bytes, receipt: str) -> bytes:
        self.sock.sendall(f"SEND\ndestination:/queue/{queue}\npersistent:true\nreceipt:"
                          f"{receipt}\ncontent-length:{len(body)}\n\n".encode() + body + b"\0")
        return self.read()

    def drain(self, queue: str, count: int) -> list[bytes]:
        """Subscribe (client-individual), ack ``count`` messages each with a receipt:
        their bodies, once every ack's RECEIPT is back."""
        self.sock.sendall(f"SUBSCRIBE\ndestination:/queue/{queue}\nid:s\n"
                          "ack:client-individual\n\n\0".encode())
        bodies: list[bytes] = []
        receipts = 0
        while len(bodies) < count or receipts < len(bodies):
            frame = self.read()
            if frame.startswith(b"RECEIPT"):
                receipts += 1
                continue
            assert frame.startswith(b"MESSAGE"), frame[:300]
            head, body = frame.split(b"\n\n", 1)
            headers = dict(line.split(b":", 1) for line in head.split(b"\n")[1:])
            bodies.append(body)
            self.sock.sendall(b"ACK\nid:" + headers[b"ack"] + b"\nreceipt:a\n\n\0")
        return bodies

    def close(self) -> None:
        self.file.close()
        self.sock.close()


@pytest.fixture
def brokers() -> Iterator[list[Broker]]:
    started: list[Broker] = []
    yield started
    for b in started:
        b.kill()


@pytest.mark.parametrize("stop_while_full", [True, False])
def test_a_full_disk_refuses_the_send_and_sigterm_exits_0(
        tmp_path: Path, brokers: list[Broker], stop_while_full: bool) -> None:
    flag = tmp_path / "disk-full"
    broker = Broker(tmp_path / "data", flag)
    brokers.append(broker)
    client = broker.client()
    for i in range(3):
        assert client.send("q", b"kept%d" % i, f"r{i}").startswith(b"RECEIPT")
    flag.touch()
    refused = client.send("q", b"refused", "r3")
    assert refused.startswith(b"ERROR") and b"the broker's store is full" in refused
    assert b"receipt-id:r3" in refused
    if not stop_while_full:
        flag.unlink()
        assert broker.client().send("q", b"kept3", "r4").startswith(b"RECEIPT")
    code, err = broker.stop()
    assert code == 0, err
    assert "Traceback" not in err
    restarted = Broker(tmp_path / "data")
    brokers.append(restarted)
    kept = 3 if stop_while_full else 4
    assert restarted.client().drain("q", kept) == [b"kept%d" % i for i in range(kept)]
    assert restarted.stop()[0] == 0


def test_an_unusable_store_stops_the_broker_and_closes_its_port(
        tmp_path: Path, brokers: list[Broker]) -> None:
    broker = Broker(tmp_path / "data")
    brokers.append(broker)
    client = broker.client()
    assert client.send("q", b"one", "r1").startswith(b"RECEIPT")
    (tmp_path / "data" / "messages.sqlite").unlink()  # the store is gone
    answer = client.send("q", b"two", "r2")
    assert answer.startswith(b"ERROR") and b"unusable" in answer
    assert b"RECEIPT" not in answer
    _, err = broker.proc.communicate(timeout=60)
    broker.close_clients()
    assert broker.proc.returncode not in (0, None)
    assert "the store file was removed" in err and "Traceback" not in err
    with pytest.raises(ConnectionRefusedError):  # no zombie listening and dropping
        socket.create_connection(("127.0.0.1", broker.port), timeout=10).close()


def _tmpfs(where: Path) -> bool:
    """Mount an 8 MiB tmpfs at ``where`` (root only); False when it cannot."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    where.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)],
                          capture_output=True).returncode == 0


@pytest.fixture
def disk(tmp_path: Path, brokers: list[Broker]) -> Iterator[Path]:
    """An 8 MiB tmpfs to keep a store on, unmounted once its brokers are killed (they
    hold the store's files open)."""
    disk = tmp_path / "disk"
    if not _tmpfs(disk):
        pytest.skip("mounting a tmpfs needs root")
    yield disk
    for b in brokers:
        b.kill()
    subprocess.run(["umount", str(disk)], check=False)


def test_a_real_full_filesystem_refuses_then_acks_make_room(
        disk: Path, brokers: list[Broker]) -> None:
    broker = Broker(disk / "data")
    brokers.append(broker)
    producer = broker.client()
    body = b"x" * 4000
    receipted = 0
    while True:  # until the 8 MiB are full: at most 2,048 of these fit
        answer = producer.send("big", body, f"r{receipted}")
        if not answer.startswith(b"RECEIPT"):
            break
        receipted += 1
    assert answer.startswith(b"ERROR") and b"the broker's store is full" in answer
    assert 0 < receipted < 2048
    consumer = broker.client()  # every receipted message, and acks that work
    assert len(consumer.drain("big", receipted)) == receipted
    again = broker.client()  # the acks freed room inside the store
    assert again.send("big", b"after", "z").startswith(b"RECEIPT")
    code, err = broker.stop()
    assert code == 0 and "Traceback" not in err, err


def test_a_broker_restarted_on_a_full_filesystem_starts_and_serves_its_consumers(
        disk: Path, brokers: list[Broker]) -> None:
    """The disk filled while the broker was down: opening the store needs room (SQLite
    writes its log and the log's index), so the broker refused to start, and nobody could
    drain the queue that would free it. Now it gives its space reserve back to open,
    refuses SENDs for space, delivers what is stored, and takes SENDs again once acks
    made room; acked messages stay acked across the next restart."""
    first = Broker(disk / "data")
    brokers.append(first)
    producer = first.client()
    for i in range(1500):  # the pages their acks free are room enough for more
        assert producer.send("kept", b"%04d" % i + b"k" * 996, f"r{i}").startswith(
            b"RECEIPT")
    assert first.stop()[0] == 0
    # someone else fills the disk
    with open(disk / "filler", "wb") as filler, pytest.raises(OSError):
        while True:
            filler.write(b"f" * 65536)
            filler.flush()
    again = Broker(disk / "data")
    brokers.append(again)
    refused = again.client().send("kept", b"late", "z")
    assert refused.startswith(b"ERROR") and b"the broker's store is full" in refused
    bodies = again.client().drain("kept", 1500)
    assert sorted(bodies) == [b"%04d" % i + b"k" * 996 for i in range(1500)]
    assert again.client().send("after", b"x", "y").startswith(b"RECEIPT")
    code, err = again.stop()
    assert code == 0 and "Traceback" not in err, err
    (disk / "filler").unlink()
    last = Broker(disk / "data")
    brokers.append(last)
    reader = last.client()
    assert reader.drain("after", 1) == [b"x"]
    reader.sock.sendall(b"SUBSCRIBE\ndestination:/queue/kept\nid:k\nack:auto\n"
                        b"receipt:sub\n\n\0")
    assert reader.read().startswith(b"RECEIPT")  # before any MESSAGE it would deliver
    reader.sock.sendall(b"SEND\ndestination:/queue/probe\nreceipt:p\n\nx\0")
    assert reader.read().startswith(b"RECEIPT")  # no acked message came back first
