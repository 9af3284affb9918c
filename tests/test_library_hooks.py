"""The client libraries' private hooks run only on the releases the tests ran against;
every other release (and ``JMSPY_LIBRARY_HOOKS=0``) takes the public path, which works
the same (transports/library_hooks.py, transports/stomp/stomppy_private.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import stomp.transport
import stomp.utils
from library_paths import needs_stomp_hooks

from jmspy import ConnectionFactory, Session
from jmspy.transports import library_hooks
from jmspy.transports.library_hooks import installed_version
from jmspy.transports.stomp import stomppy_private


@pytest.mark.parametrize(("version", "tested", "allowed"), [
    ("9.0.0", ("9.0",), True),
    ("9.0.7", ("9.0",), True),  # a patch release of a tested line
    ("9.1.0", ("9.0",), False),  # a newer minor release: not tested, public path
    ("8.1.0", ("9.0",), False),  # an older one: the same
    ("10.0.0", ("9.0",), False),
    ("9.0.0rc1", ("9.0",), True),
    ("2.2.1", ("2.1", "2.2"), True),
    ("2", ("2.2",), False),  # no minor number: not one of the tested lines
])
def test_hooks_run_only_on_a_tested_release_line(version: str, tested: tuple[str, ...],
                                                 allowed: bool) -> None:
    assert library_hooks._matches(version, tested) is allowed


def test_the_installed_client_libraries_are_the_tested_ones() -> None:
    """The pins in pyproject.toml stop after the newest tested release, so what the tests
    install is a tested release: the hooks they test are the ones in use."""
    version = installed_version("stomp.py")
    assert version is not None
    assert library_hooks._matches(version, stomppy_private.TESTED), (
        f"stomp.py {version} is not in stomppy_private.TESTED {stomppy_private.TESTED}: "
        "test the hooks on it and add it, or pin below it")


def test_the_installed_paho_is_a_tested_one() -> None:
    from jmspy.transports.mqtt import paho_private

    version = installed_version("paho-mqtt")
    assert version is not None
    assert library_hooks._matches(version, paho_private.TESTED), (
        f"paho-mqtt {version} is not in paho_private.TESTED {paho_private.TESTED}: test "
        "the hooks on it and add it, or pin below it")


def test_only_the_adapters_name_the_libraries_private_state() -> None:
    """stomp.py's mangled names and paho's underscored client members appear in the two
    adapters and nowhere else in the package."""
    import re

    root = Path(__file__).resolve().parent.parent
    adapters = {root / "transports/stomp/stomppy_private.py",
                *(root / "transports/mqtt/paho_private").glob("*.py")}
    private = re.compile(r"_BaseTransport__|_Transport__|\bclient\._[a-z]|\bclient, \"_[a-z]")
    offenders = sorted(
        str(p.relative_to(root)) for d in ("jmspy", "transports", "broker_ref")
        for p in (root / d).rglob("*.py") if p not in adapters and private.search(p.read_text()))
    assert offenders == []


def test_an_untested_release_or_the_switch_turns_the_hooks_off(tmp_path: Path) -> None:
    probe = ("from jmspy.transports.stomp import stomppy_private as p; "
             "print(p.enabled())")
    for env, expected in (({"JMSPY_LIBRARY_HOOKS": "0"}, "False"), ({}, "True")):
        done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, text=True,
                              capture_output=True, check=True,
                              env={**os.environ, "JMSPY_LIBRARY_HOOKS": "", **env})
        assert done.stdout.strip() == expected, (env, done.stderr)
    assert library_hooks.hooks_allowed("no-such-distribution-here", ("1.0",)) is False


def _round_trip(url: str) -> list[str]:
    conn = ConnectionFactory(f"{url}?heartbeat=0").create_connection()
    try:
        session = conn.create_session(False, Session.CLIENT_ACKNOWLEDGE)
        queue = session.create_queue("public.path")
        consumer = session.create_consumer(queue)
        conn.start()
        producer = session.create_producer(queue)
        for i in range(50):
            producer.send(session.create_text_message(f"m{i}"))
        got = []
        for _ in range(50):
            message = consumer.receive(10)
            assert message is not None, f"received {len(got)} of 50"
            got.append(message.text)
        message.acknowledge()
        return got
    finally:
        conn.close()


def test_stomp_takes_stomp_pys_own_reading_and_lock_off_a_tested_release(
        vm_broker_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The public path end to end: stomp.py parses every frame and keeps its own
    semaphore, and messages, order and acknowledgement are as on the hooked path."""
    monkeypatch.setattr(stomppy_private, "enabled", lambda: False)
    parsed = []
    original = stomp.utils.parse_frame

    def counting(frame: bytes) -> Any:
        parsed.append(frame[:10])
        return original(frame)

    monkeypatch.setattr(stomp.transport, "parse_frame", counting)
    monkeypatch.setattr(stomp.utils, "parse_frame", counting)
    locks: list[Any] = []
    real_init = stomp.transport.Transport.__init__

    def remember(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        locks.append(self)

    monkeypatch.setattr(stomp.transport.Transport, "__init__", remember)
    host, _ = vm_broker_factory()
    url = host.add_connector("stomp://127.0.0.1:0")
    assert _round_trip(url) == [f"m{i}" for i in range(50)]
    assert len(parsed) >= 50  # CONNECTED, RECEIPTs and the 50 MESSAGEs
    semaphore = type(threading.BoundedSemaphore())
    assert locks and all(isinstance(stomppy_private.write_lock(t), semaphore) for t in locks)


@needs_stomp_hooks
def test_stomp_uses_its_hooks_on_the_tested_release(
        vm_broker_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(frame: bytes) -> Any:
        raise AssertionError("stomp.py's parser was used on a tested release")

    monkeypatch.setattr(stomp.transport, "parse_frame", refuse)
    monkeypatch.setattr(stomp.utils, "parse_frame", refuse)
    assert stomppy_private.enabled()
    host, _ = vm_broker_factory()
    url = host.add_connector("stomp://127.0.0.1:0")
    assert _round_trip(url) == [f"m{i}" for i in range(50)]
