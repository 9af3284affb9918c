"""``vm.start_broker(name, data_dir=...)``: an in-process broker that keeps persistent
messages across a restart and across kill -9 of its process; plain ``vm://`` stays in
memory; one broker per data directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from jmspy import ConnectionFactory, DeliveryMode, Queue
from jmspy.errors import InvalidConfigurationException
from jmspy.transports import vm


def _drain(name: str) -> list[str]:
    with ConnectionFactory(f"vm://{name}?create=false").create_connection() as conn:
        s = conn.create_session()
        c = s.create_consumer(Queue("kept"))
        conn.start()
        out = []
        while (m := c.receive_no_wait()) is not None:
            out.append(m.text)
        return out


def test_persistent_messages_survive_a_restart_non_persistent_do_not(tmp_path: Path) -> None:
    vm.start_broker("pv1", data_dir=tmp_path)
    try:
        with ConnectionFactory("vm://pv1").create_connection() as conn:
            s = conn.create_session()
            p = s.create_producer(Queue("kept"))
            p.send(s.create_text_message("durable"))
            p.send(s.create_text_message("fleeting"), delivery_mode=DeliveryMode.NON_PERSISTENT)
    finally:
        vm.stop_broker("pv1")
    vm.start_broker("pv1", data_dir=tmp_path)
    try:
        assert _drain("pv1") == ["durable"]
    finally:
        vm.stop_broker("pv1")
    vm.start_broker("pv1", data_dir=tmp_path)
    try:
        assert _drain("pv1") == []  # acknowledged: gone for good
    finally:
        vm.stop_broker("pv1")


def test_one_in_process_broker_per_data_directory(tmp_path: Path) -> None:
    vm.start_broker("pv2", data_dir=tmp_path)
    try:
        with pytest.raises(InvalidConfigurationException, match="in use by another broker"):
            vm.start_broker("pv3", data_dir=tmp_path)
    finally:
        vm.stop_broker("pv2")
    vm.start_broker("pv3", data_dir=tmp_path)  # released by stop_broker
    vm.stop_broker("pv3")


_CHILD = textwrap.dedent("""
    import sys
    from jmspy import ConnectionFactory, Queue
    from jmspy.transports import vm
    vm.start_broker("child", data_dir=sys.argv[1])
    with ConnectionFactory("vm://child").create_connection() as conn:
        s = conn.create_session()
        p = s.create_producer(Queue("kept"))
        i = 0
        while True:
            p.send(s.create_text_message(f"m{i}"))
            print(i, flush=True)  # send() returned: the broker has it
            i += 1
""")


def test_what_send_returned_for_survives_kill_9_of_the_process(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    last = -1
    for _ in range(300):
        last = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    vm.start_broker("pv4", data_dir=tmp_path)  # the dead child's lock went with it
    try:
        got = _drain("pv4")
    finally:
        vm.stop_broker("pv4")
    assert [f"m{i}" for i in range(last + 1)] == got[: last + 1]
    print(f"\n{last + 1} sends confirmed before kill -9, {len(got)} recovered, 0 lost")


# -- the kill -9 harness of the persistence issue, for an in-process broker -----------------

_WORKER = textwrap.dedent("""
    import os, sys, threading, traceback
    from jmspy import ConnectionFactory, Queue, Session
    from jmspy.broker_ref.core import DestinationNotFound
    from jmspy.transports import vm
    data_dir, start, consume = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    vm.start_broker("kv", data_dir=data_dir)
    out = threading.Lock()

    def say(*words):
        with out:
            print(*words, flush=True)

    def produce():
        try:
            with ConnectionFactory("vm://kv").create_connection() as conn:
                s = conn.create_session()
                p = s.create_producer(Queue("durable"))
                i = start
                while True:
                    m = s.create_text_message(f"m{i}")
                    m.set_property("n", i)
                    p.send(m)  # persistent: returns once the store has it
                    say("S", i)
                    i += 1
        except BaseException:
            traceback.print_exc()
            os._exit(3)  # a harness that stops producing must not wait to be killed

    def left():
        try:
            return vm.get_broker("kv").stats("durable")["messageCount"]
        except DestinationNotFound:  # an empty store recreates no queue
            return 0

    if start >= 0:
        threading.Thread(target=produce, daemon=True).start()
    with ConnectionFactory("vm://kv").create_connection() as conn:
        s = conn.create_session(ack_mode=Session.INDIVIDUAL_ACKNOWLEDGE)
        c = s.create_consumer(Queue("durable"))
        conn.start()
        while consume:
            m = c.receive(1.0)
            if m is None:
                if start < 0 and left() == 0:
                    say("DONE")
                    break
                continue
            n = m.get_int_property("n")
            say("R", n, int(m.redelivered))
            m.acknowledge()  # returns once the store has forgotten it
            say("A", n)
""")

#: Kills, and the confirmed sends each round waits for before its kill (about 20,000 in all)
KILLS = 10
ROUND = 1_000_000


def _run_worker(data_dir: Path, start: int, consume: bool, kill_after: int | None,
                rng: Any) -> list[list[str]]:
    """One child process: produce from ``start`` (-1: none) and consume; kill -9 after
    ``kill_after`` confirmed sends plus a random few more lines, or run to DONE."""
    proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(data_dir), str(start),
                             "1" if consume else "0"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    # a child that stops printing (a hang) is killed, and the round then fails below
    watchdog = threading.Timer(300, proc.kill)
    watchdog.start()
    lines: list[list[str]] = []
    sends = 0
    extra = rng.randint(0, 200)
    for line in proc.stdout:
        lines.append(line.split())
        sends += lines[-1][0] == "S"
        if lines[-1][0] == "DONE":
            break
        if kill_after is not None and sends >= kill_after:
            if extra == 0:
                os.kill(proc.pid, signal.SIGKILL)  # anywhere: mid-send, mid-ack, mid-commit
                break
            extra -= 1
    # what was printed before it died; a line the kill cut short (no newline) is not one
    # the worker finished saying ("S 12" of "S 123")
    lines.extend(line.split() for line in proc.stdout if line.endswith("\n"))
    watchdog.cancel()
    code = proc.wait(30)
    proc.stdout.close()
    assert code in (0, -signal.SIGKILL) and (kill_after is not None or lines[-1] == ["DONE"]), (
        f"the worker failed (exit {code}); its last lines: {lines[-5:]}")
    return lines


def test_send_and_acknowledge_survive_kill_9_of_an_in_process_broker(tmp_path: Path) -> None:
    import random

    rng = random.Random(11)
    confirmed: set[int] = set()  # send() returned
    acked: set[int] = set()  # acknowledge() returned
    received: dict[int, list[int]] = {}  # n -> redelivered flag of each delivery
    acked_before: dict[int, int] = {}  # n -> round its ack returned in
    runs = [(r * ROUND, True, rng.randint(1500, 2500)) for r in range(KILLS)]
    runs.append((-1, True, None))  # the drain: no producer, consume to the end
    for round_no, (start, consume, kill_after) in enumerate(runs):
        for words in _run_worker(tmp_path, start, consume, kill_after, rng):
            if words[0] == "S":
                confirmed.add(int(words[1]))
            elif words[0] == "A":
                acked.add(int(words[1]))
                acked_before.setdefault(int(words[1]), round_no)
            elif words[0] == "R":
                n = int(words[1])
                assert acked_before.get(n, round_no) >= round_no, (
                    f"m{n} was delivered again after its acknowledge() returned")
                received.setdefault(n, []).append(int(words[2]))
    assert len(confirmed) >= KILLS * 1500  # the harness really ran at size
    lost = confirmed - set(received)
    assert not lost, f"send() returned for these but they never came: {sorted(lost)[:20]}"
    unmarked = [n for n, flags in received.items() if 0 in flags[1:]]
    assert not unmarked, f"delivered again without the redelivered flag: {unmarked[:20]}"
    again = sum(len(flags) - 1 for flags in received.values())
    print(f"\n{len(confirmed)} confirmed sends, {len(acked)} confirmed acks over {KILLS} "
          f"kill -9 of vm.start_broker(data_dir=...): 0 lost, 0 redelivered after a "
          f"confirmed ack, {again} redeliveries, all marked redelivered")
