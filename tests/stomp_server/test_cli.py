"""`jmspy broker` as a real subprocess, `jmspy stat`, and config errors."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import stomp
from brokers import free_port
from stomp_support import Collector


@pytest.fixture(params=["default", "asyncio", "uvloop"])
def broker_process(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``jmspy broker`` on its default loop, and on each ``--loop``: same behaviour. It
    runs in a fresh directory, so its default data directory is ``tmp_path/jmspy-data``."""
    if request.param == "uvloop":
        import uvloop  # noqa: F401  (in the test extra: missing fails here, never skips)
    port = free_port()
    loop = [] if request.param == "default" else ["--loop", request.param]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jmspy", "broker", "--port", str(port), *loop],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == (f"jmspy broker listening on 127.0.0.1:{port} "
                                f"(persistent messages in {tmp_path / 'jmspy-data'})"), line
        assert (tmp_path / "jmspy-data" / "messages.sqlite").exists()
        # printed to stderr before the stdout line above, so it is already in the pipe;
        # uvloop is in the test extra, so the default is uvloop
        assert proc.stderr is not None
        running = "asyncio" if request.param == "asyncio" else "uvloop"
        assert proc.stderr.readline().startswith(f"jmspy broker: {running} event loop (")
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def test_jmspy_broker_serves_and_stops_on_sigterm(broker_process) -> None:
    proc, port = broker_process
    conn = stomp.Connection12([("127.0.0.1", port)])
    lst = Collector()
    conn.set_listener("c", lst)
    conn.connect(wait=True, headers={"host": "/"})
    conn.subscribe("/queue/cli", id="s", ack="client-individual")
    conn.send("/queue/cli", "over tcp")
    m = lst.wait_messages(1)[0]
    conn.ack(m.headers["ack"])
    conn.send("/queue/kept", "stays", receipt="r", headers={"persistent": "true"})
    lst.wait_receipt("r")
    out = subprocess.run(
        [sys.executable, "-m", "jmspy", "stat", "--port", str(port)],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 0, out.stderr
    usage, *lines = out.stdout.splitlines()
    # the broker-wide line: the store in the data directory, the spool, the RAM budget
    assert usage.startswith("store ") and "jmspy-data/messages.sqlite: " in usage
    assert "temp 0.0 MB of 10,240.0 MB" in usage and "memory 0.0 MB of 64.0 MB (0 %" in usage
    assert "producers waiting" not in usage
    assert lines[0].split() == ["destination", "kind", "messageCount", "deliveringCount",
                                "scheduledCount", "messagesReplaced", "consumers", "expired",
                                "deadLettered", "stored", "inMemory", "paged", "memory",
                                "memory%", "blockedProducers", "discarded"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["kept"][1:4] == ["queue", "1", "0"]
    # stored, in RAM, paged out: on disk in the default data directory, and held in RAM;
    # its RAM (one pending message), no limit of its own, nobody waiting, nothing dropped
    assert rows["kept"][-7:-4] == ["1", "1", "0"]
    assert int(rows["kept"][-4]) > 0 and rows["kept"][-3:] == ["0", "0", "0"]
    assert rows["cli"][2] == "0" and rows["cli"][-7] == "0"
    conn.disconnect()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


def test_stat_without_broker_fails_clearly() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jmspy", "stat", "--port", str(free_port()), "--timeout", "1"],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 1 and "cannot read stats" in out.stderr


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ('[address-settings."orders.#"]\nconsumer-flow-limt = 3\n',
         ["consumer-flow-limt", "orders.#", "consumer-flow-limit"]),
        ('[address-settings."a"]\nconsumer-flow-limit = "ten"\n',
         ["consumer-flow-limit", "int"]),
        ("[limits]\nmax-frame-bytes = true\n", ["max-frame-bytes", "int"]),
        ("[brokr]\nport = 1\n", ["brokr"]),
        ("[broker]\nidle-spin-us = 5000\n", ["idle-spin-us = 5000", "0 (off) and 1000"]),
        ('[broker]\nidle-spin-us = "fast"\n', ["idle-spin-us", "int"]),
        ("[broker\n", ["not valid TOML"]),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, text: str, needles: list[str]) -> None:
    cfg = tmp_path / "broker.toml"
    cfg.write_text(text)
    out = subprocess.run(
        [sys.executable, "-m", "jmspy", "broker", "--config", str(cfg)],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 2
    assert str(cfg) in out.stderr
    for needle in needles:
        assert needle in out.stderr


def test_an_idle_spin_option_out_of_range_is_a_clear_error() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jmspy", "broker", "--port", "0", "--idle-spin-us", "5000"],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 2
    assert "--idle-spin-us = 5000 must be between 0 (off) and 1000" in out.stderr


def test_uvloop_asked_for_but_missing_is_a_clear_error() -> None:
    # sys.modules["uvloop"] = None makes "import uvloop" fail as if it were not installed
    code = ("import sys; sys.modules['uvloop'] = None; from jmspy.cli import main; "
            "sys.exit(main(['broker', '--port', '0', '--loop', 'uvloop']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 2
    assert "uvloop is not installed: pip install uvloop" in out.stderr


def test_unknown_event_loop_in_config_is_a_clear_error(tmp_path: Path) -> None:
    from jmspy.broker_ref.config import ConfigError, load_config

    cfg = tmp_path / "b.toml"
    cfg.write_text('[broker]\nloop = "trio"\n')
    with pytest.raises(ConfigError, match=r"loop = 'trio' must be one of: asyncio, uvloop"):
        load_config(cfg)
    cfg.write_text('[broker]\nloop = "uvloop"\n')
    assert load_config(cfg).loop == "uvloop"
    cfg.write_text('[broker]\nloop = "asyncio"\n')
    assert load_config(cfg).loop == "asyncio"


def test_default_loop_is_uvloop_when_installed_else_asyncio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import uvloop  # noqa: F401  (in the test extra: missing fails here, never skips)

    from jmspy.broker_ref.config import BrokerConfig, load_config

    assert load_config(None).loop == "uvloop"
    assert BrokerConfig().loop == "uvloop"
    # None in sys.modules makes "import uvloop" fail as if it were not installed
    monkeypatch.setitem(sys.modules, "uvloop", None)
    assert load_config(None).loop == "asyncio"
    assert BrokerConfig().loop == "asyncio"


def _loop_line(command: list[str], cwd: Path) -> str:
    """Start ``jmspy broker`` (``command`` runs it, on a free port appended), wait for its
    listening line, and return the stderr line that names its event loop."""
    port = free_port()
    proc = subprocess.Popen([*command, "--port", str(port), "--in-memory"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith(f"jmspy broker listening on 127.0.0.1:{port}")
        return proc.stderr.readline().strip()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_without_uvloop_the_broker_starts_on_asyncio_and_says_so(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['uvloop'] = None; from jmspy.cli import main; "
            "sys.exit(main(['broker', *sys.argv[1:]]))")
    assert _loop_line([sys.executable, "-c", code], tmp_path) == (
        "jmspy broker: asyncio event loop (the default: uvloop is not installed)")


def test_loop_named_in_the_config_is_said_to_come_from_it(tmp_path: Path) -> None:
    cfg = tmp_path / "b.toml"
    cfg.write_text('[broker]\nloop = "asyncio"\n')
    command = [sys.executable, "-m", "jmspy", "broker", "--config", str(cfg)]
    assert _loop_line(command, tmp_path) == (
        "jmspy broker: asyncio event loop ([broker] loop in the config)")


def test_config_maps_address_settings(tmp_path: Path) -> None:
    from jmspy.broker_ref.config import load_config

    cfg = tmp_path / "b.toml"
    cfg.write_text('[broker]\nport = 0\nname = "x"\n[limits]\nheartbeat-ms = 5\n'
                   '[address-settings."orders.#"]\nconsumer-flow-limit = 7\n'
                   'dead-letter-address = "DLQ.orders"\n')
    c = load_config(cfg)
    assert c.port == 0 and c.heartbeat_ms == 5
    kwargs = c.broker_kwargs()
    assert kwargs["name"] == "x"
    s = kwargs["settings"]["orders.#"]
    assert s.consumer_flow_limit == 7 and s.dead_letter_address == "DLQ.orders"
    assert load_config(None).port == 61613


def test_the_configured_idle_spin_reaches_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from jmspy.broker_ref.config import load_config
    from jmspy.broker_ref.protocols.stomp import runner
    from jmspy.idle_spin import DEFAULT_IDLE_SPIN_US

    served: list[runner.StompServer] = []

    class Recorded(runner.StompServer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            served.append(self)

    monkeypatch.setattr(runner, "StompServer", Recorded)
    cfg = tmp_path / "b.toml"
    cfg.write_text("[broker]\nport = 0\nidle-spin-us = 250\n")
    config = load_config(cfg)
    config.data_dir = None

    async def serve_until_ready() -> None:
        stop = asyncio.Event()
        await runner.serve(config, stop, on_ready=lambda host, port: stop.set())

    asyncio.run(serve_until_ready())
    assert [s.polling.spin.window_s for s in served] == [pytest.approx(250e-6)]
    assert load_config(None).idle_spin_us == DEFAULT_IDLE_SPIN_US


@pytest.mark.parametrize("in_memory", [False, True])
def test_data_dir_from_config_and_in_memory_override_say_where_messages_are(
    tmp_path: Path, in_memory: bool
) -> None:
    data = tmp_path / "data"
    config = tmp_path / "broker.toml"
    config.write_text(f'[broker]\ndata-dir = "{data}"\n')
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jmspy", "broker", "--config", str(config), "--port", str(port),
         *(["--in-memory"] if in_memory else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    if in_memory:
        assert line.endswith("(in memory: messages are lost at exit)"), line
        assert not data.exists()
    else:
        assert line.endswith(f"(persistent messages in {data.resolve()})"), line
        assert (data / "messages.sqlite").exists()
