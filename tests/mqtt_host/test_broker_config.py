"""``[broker.mqtt]`` / ``--mqtt-port``: the MQTT listener beside STOMP on one loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from jmspy.broker_ref.config import BrokerConfig, ConfigError, load_config

paho = pytest.importorskip("paho.mqtt.client")
WAIT = 10.0


def test_broker_mqtt_table_is_read(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text("[broker.mqtt]\nport = 0\nmax-packet-bytes = 4096\n")
    cfg = load_config(path)
    assert (cfg.mqtt_port, cfg.mqtt_max_packet_bytes) == (0, 4096)
    path.write_text("[broker.mqtt]\nprot = 1\n")
    with pytest.raises(ConfigError, match="prot"):
        load_config(path)
    path.write_text("[broker.mqtt]\nport = 70000\n")
    with pytest.raises(ConfigError, match="between 0"):
        load_config(path)


def test_serve_listens_for_mqtt_beside_stomp() -> None:
    from jmspy.broker_ref.protocols.stomp.runner import serve

    cfg = BrokerConfig(port=0, data_dir=None, mqtt_port=0)
    ready: dict[str, Any] = {}
    up = threading.Event()
    loop = asyncio.new_event_loop()
    stop: asyncio.Event | None = None

    async def main() -> None:
        nonlocal stop
        stop = asyncio.Event()

        def on_mqtt(host: str, port: int, tls: bool) -> None:
            ready["mqtt"] = port
            up.set()

        await serve(cfg, stop, on_mqtt_ready=on_mqtt)

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    try:
        assert up.wait(WAIT)
        got = threading.Event()
        received: list[bytes] = []
        client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="c",
                             protocol=paho.MQTTv5)
        subscribed = threading.Event()
        client.on_subscribe = lambda *a: subscribed.set()
        client.on_message = lambda c, u, m: (received.append(m.payload), got.set())
        client.connect("127.0.0.1", ready["mqtt"])
        client.loop_start()
        client.subscribe("t", 1)
        assert subscribed.wait(WAIT)
        client.publish("t", b"ping", qos=1)
        assert got.wait(WAIT) and received == [b"ping"]
        client.disconnect()
        client.loop_stop()
    finally:
        assert stop is not None
        loop.call_soon_threadsafe(stop.set)
        thread.join(WAIT)
        loop.close()


def test_jmspy_broker_mqtt_port_option(tmp_path: Path) -> None:
    """``jmspy broker --mqtt-port`` as a real process: it says where MQTT listens, and a
    paho client publishes and receives there."""
    import subprocess
    import sys

    from brokers import free_port

    mqtt_port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jmspy", "broker", "--port", "0", "--in-memory",
         "--mqtt-port", str(mqtt_port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("jmspy broker listening on 127.0.0.1:")
        assert proc.stdout.readline().strip() == (
            f"jmspy broker listening on 127.0.0.1:{mqtt_port} for MQTT 3.1.1 and 5")
        client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="cli",
                             protocol=paho.MQTTv311)
        got = threading.Event()
        subscribed = threading.Event()
        client.on_subscribe = lambda *a: subscribed.set()
        client.on_message = lambda c, u, m: got.set()
        client.connect("127.0.0.1", mqtt_port)
        client.loop_start()
        client.subscribe("cli/t", 1)
        assert subscribed.wait(WAIT)
        client.publish("cli/t", b"x", qos=1)
        assert got.wait(WAIT)
        client.disconnect()
        client.loop_stop()
    finally:
        proc.terminate()
        proc.communicate(timeout=WAIT)
