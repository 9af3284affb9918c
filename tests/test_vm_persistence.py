"""``vm.start_broker(name, data_dir=...)``: an in-process broker that keeps persistent
messages across a restart and across kill -9 of its process; plain ``vm://`` stays in
memory; one broker per data directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

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
