"""What ``jmspy broker`` refuses reaches the user once, and true: the ERROR it sends before
closing is the text of the call that failed under it and of the exception listener, not
the errno of the socket it closed, and no library traceback lands on stderr.

The oversized send runs as a user would run it: a separate client process with logging
left as Python starts it, against ``jmspy broker`` as a process, the body large enough
that the broker closes the connection while the client is still writing it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import free_port
from stomp_support import ServerHandle, orders_policy

from jmspy import ConnectionFactory, JMSSecurityException

LIMIT = 65536
#: Far beyond what the loopback socket buffers take in, so the write is still going on
#: when the broker refuses the frame and closes.
SIZE = 8 * 1024 * 1024

CLIENT = r"""
import json, sys, threading
from jmspy import ConnectionFactory, DeliveryMode, JMSException
port, persistent = int(sys.argv[1]), sys.argv[2] != "non-persistent"
transacted = sys.argv[2] == "transacted"
heard, lost = [], threading.Event()
def listener(exc):
    heard.append(str(exc))
    if exc.error_code == "CONNECTION_LOST":
        lost.set()
conn = ConnectionFactory(f"stomp://127.0.0.1:{port}").create_connection()
conn.set_exception_listener(listener)
session = conn.create_session(transacted=transacted)
producer = session.create_producer(session.create_queue("big"))
consumer = session.create_consumer(session.create_queue("other"))
conn.start()
mode = DeliveryMode.PERSISTENT if persistent else DeliveryMode.NON_PERSISTENT
try:
    producer.send(session.create_bytes_message(b"x" * int(sys.argv[3])), delivery_mode=mode)
    if transacted:
        session.commit()
    raised = None
except JMSException as exc:
    raised = [type(exc).__name__, str(exc)]
try:
    producer.send(session.create_text_message("after"))
    later = None
except JMSException as exc:
    later = str(exc)
lost.wait(10)  # the listener's last event: the connection is gone for good
try:
    consumer.receive(10)
    received = None
except JMSException as exc:
    received = str(exc)
conn.close()
print(json.dumps({"raised": raised, "later": later, "received": received, "heard": heard}))
"""


class BrokerProcess:
    """``jmspy broker`` with a [limits] table, on a free port."""

    def __init__(self, tmp_path: Path, config: str) -> None:
        self.port = free_port()
        cfg = tmp_path / "broker.toml"
        cfg.write_text(config)
        self.log = (tmp_path / "broker.log").open("w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jmspy", "broker", "--in-memory", "--port",
             str(self.port), "--config", str(cfg)],
            stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=tmp_path)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # printed once it listens
        assert line.startswith("jmspy broker listening"), line

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.communicate(timeout=20)
        self.log.close()


@pytest.fixture
def small_frames(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path, f"[limits]\nmax-frame-bytes = {LIMIT}\n")
    yield broker
    broker.stop()


def _said_once(text: str) -> None:
    for said in (str(SIZE), str(LIMIT), "max-frame-bytes"):
        assert text.count(said) == 1, (said, text)


@pytest.mark.parametrize("mode", ["persistent", "non-persistent", "transacted"])
def test_an_oversized_send_raises_the_brokers_error_naming_size_limit_and_key_once(
    small_frames: BrokerProcess, mode: str
) -> None:
    run = subprocess.run([sys.executable, "-c", CLIENT, str(small_frames.port), mode,
                          str(SIZE)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "error sending frame" not in run.stderr
    result: dict[str, Any] = json.loads(run.stdout)
    if mode != "non-persistent" or result["raised"] is not None:
        # (a non-persistent send is fire and forget: it may return before the ERROR)
        kind, text = result["raised"]  # transacted: by the send or by the commit
        assert kind in ("ResourceAllocationException", "TransactionRolledBackException")
        assert "Errno" not in text and "Bad file descriptor" not in text
        _said_once(text)
    # the calls after it fail with the same reason, not "the connection is down"
    _said_once(result["later"])
    _said_once(result["received"])
    # the listener hears the ERROR, then CONNECTION_LOST naming it: each says it once
    heard = result["heard"]
    assert len(heard) == 2 and "reported an error" in heard[0] and "lost" in heard[1]
    for text in heard:
        _said_once(text)


@pytest.fixture
def secure(server_factory: Callable[..., ServerHandle]) -> ServerHandle:
    return server_factory(security=orders_policy("s3cret", "audit", send=["traders"]))


def test_a_wrong_password_is_refused_in_one_sentence(secure: ServerHandle) -> None:
    factory = ConnectionFactory(f"stomp://127.0.0.1:{secure.port}")
    with pytest.raises(JMSSecurityException) as refused:
        factory.create_connection("alice", "wrong")
    text = str(refused.value)
    assert text.count("unknown user or wrong password") == 1
    assert text.count("'alice'") == 1 and text.count("check") == 1


def test_a_login_without_a_user_name_says_none_was_given(secure: ServerHandle) -> None:
    factory = ConnectionFactory(f"stomp://127.0.0.1:{secure.port}")
    with pytest.raises(JMSSecurityException) as refused:
        factory.create_connection()
    text = str(refused.value)
    assert "no user name given" in text and "None" not in text
    assert text.count("authentication required") == 1
