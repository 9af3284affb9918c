"""MQTT over TLS on the bundled broker (``[broker.mqtt] tls-port`` / ``--mqtt-tls-port``):
the certificate and client-certificate rules of ``[broker.tls]``, as a real process, with
paho's own TLS and with jmspy's ``mqtts://``."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tls_ca import TlsFiles

from jmspy import ConnectionFactory

paho = pytest.importorskip("paho.mqtt.client")
WAIT = 10.0


def _broker(tmp_path: Path, tls_ca: TlsFiles, extra: str = "") -> subprocess.Popen[str]:
    (tmp_path / "broker.toml").write_text(
        f'[broker.tls]\ncert = "{tls_ca.server_cert}"\nkey = "{tls_ca.server_key}"\n'
        f'ca = "{tls_ca.ca}"\n{extra}')
    return subprocess.Popen(
        [sys.executable, "-m", "jmspy", "broker", "--port", "0", "--tls-port", "0",
         "--in-memory", "--mqtt-tls-port", "0", "--config", str(tmp_path / "broker.toml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)


@pytest.fixture
def mqtts_port(tmp_path: Path, tls_ca: TlsFiles) -> Iterator[int]:
    proc = _broker(tmp_path, tls_ca)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]  # STOMP, STOMP/TLS, MQTT/TLS
        (mqtt,) = [line for line in lines if "for MQTT" in line]
        assert mqtt.strip().endswith("for MQTT 3.1.1 and 5 over TLS"), lines
        yield int(mqtt.split()[4].rsplit(":", 1)[1])
    finally:
        proc.terminate()
        proc.communicate(timeout=WAIT)


def test_paho_publishes_and_receives_over_the_brokers_mqtt_tls_port(
        mqtts_port: int, tls_ca: TlsFiles) -> None:
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="tls-dev",
                         protocol=paho.MQTTv5)
    client.tls_set(ca_certs=str(tls_ca.ca))  # verifies the broker's certificate and name
    got, subscribed = threading.Event(), threading.Event()
    received: list[bytes] = []
    client.on_subscribe = lambda *a: subscribed.set()
    client.on_message = lambda c, u, m: (received.append(m.payload), got.set())
    client.connect("127.0.0.1", mqtts_port)
    client.loop_start()
    try:
        client.subscribe("secure/t", 1)
        assert subscribed.wait(WAIT)
        client.publish("secure/t", b"sealed", qos=1)
        assert got.wait(WAIT) and received == [b"sealed"]
    finally:
        client.disconnect()
        client.loop_stop()


def test_jmspy_mqtts_client_round_trip(mqtts_port: int, tls_ca: TlsFiles) -> None:
    factory = ConnectionFactory(f"mqtts://127.0.0.1:{mqtts_port}", ssl_ca_file=str(tls_ca.ca))
    with factory.create_context() as context:
        topic = context.create_topic("secure.jms")
        consumer = context.create_consumer(topic)
        context.create_producer().send(topic, "over tls")
        assert consumer.receive_body(str, timeout=WAIT) == "over tls"


def test_a_client_that_does_not_trust_the_broker_is_refused(
        mqtts_port: int, tls_ca: TlsFiles) -> None:
    import socket

    context = ssl.create_default_context(cafile=str(tls_ca.other_ca))
    with socket.create_connection(("127.0.0.1", mqtts_port), timeout=WAIT) as raw, \
            pytest.raises(ssl.SSLCertVerificationError):
        context.wrap_socket(raw, server_hostname="127.0.0.1")


def test_require_client_cert_refuses_a_client_without_one(
        tmp_path: Path, tls_ca: TlsFiles) -> None:
    proc = _broker(tmp_path, tls_ca, "require-client-cert = true\n")
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        (mqtt,) = [line for line in lines if "for MQTT" in line]
        port = int(mqtt.split()[4].rsplit(":", 1)[1])
        anonymous = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="anon",
                                protocol=paho.MQTTv5)
        anonymous.tls_set(ca_certs=str(tls_ca.ca))
        refused = False
        try:
            anonymous.connect("127.0.0.1", port)
            anonymous.loop_start()
            connected = threading.Event()
            anonymous.on_connect = lambda *a: connected.set()
            refused = not connected.wait(3)  # waits for a CONNACK that must never come
        except (ssl.SSLError, OSError):
            refused = True
        finally:
            anonymous.loop_stop()
        assert refused
        with_cert = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="alice",
                                protocol=paho.MQTTv5)
        with_cert.tls_set(ca_certs=str(tls_ca.ca), certfile=str(tls_ca.client_cert),
                          keyfile=str(tls_ca.client_key))
        connected = threading.Event()
        with_cert.on_connect = lambda *a: connected.set()
        with_cert.connect("127.0.0.1", port)
        with_cert.loop_start()
        try:
            assert connected.wait(WAIT)
        finally:
            with_cert.disconnect()
            with_cert.loop_stop()
    finally:
        proc.terminate()
        proc.communicate(timeout=WAIT)


def test_the_mqtt_tls_port_needs_the_brokers_certificate(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "jmspy", "broker", "--port", "0", "--in-memory",
         "--mqtt-tls-port", "0"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode != 0
    assert "[broker.tls]" in proc.stderr and "tls-port" in proc.stderr


def test_an_in_process_broker_serves_mqtts_with_an_ssl_context(
        vm_broker_factory: Any, tls_ca: TlsFiles) -> None:
    host, _ = vm_broker_factory()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls_ca.server_cert), str(tls_ca.server_key))
    url = host.add_connector("mqtts://127.0.0.1:0", ssl_context=context)
    assert url.startswith("mqtts://127.0.0.1:")
    factory = ConnectionFactory(url, ssl_ca_file=str(tls_ca.ca))
    with factory.create_context() as jms:
        topic = jms.create_topic("vm.tls")
        consumer = jms.create_consumer(topic)
        jms.create_producer().send(topic, "in process, over tls")
        assert consumer.receive_body(str, timeout=WAIT) == "in process, over tls"


@pytest.mark.parametrize(("url", "with_context", "says"), [
    ("mqtts://127.0.0.1:0", False, "needs ssl_context"),
    ("mqtt://127.0.0.1:0", True, "use mqtts://"),
])
def test_a_tls_connector_and_its_context_go_together(
        vm_broker_factory: Any, tls_ca: TlsFiles, url: str, with_context: bool,
        says: str) -> None:
    from jmspy.errors import InvalidConfigurationException

    host, _ = vm_broker_factory()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER) if with_context else None
    with pytest.raises(InvalidConfigurationException, match=says):
        host.add_connector(url, ssl_context=context)


def test_an_in_process_mqtts_connector_logs_the_certificates_user_in(
        vm_broker_factory: Any, tls_ca: TlsFiles) -> None:
    """``user_from_cert="CN"``: alice's certificate logs alice in without a password and
    her ACLs apply (plant.# yes, other topics no); a CONNECT naming another user, even
    with that user's right password, is refused (0x86)."""
    from mqtt_pair import connect_packet, device_policy, subscribe_packet
    from mqtt_process import exchange

    policy = device_policy()
    policy.add_user("bob", "bob-pw", roles=["devices"])
    host, _ = vm_broker_factory(security=policy)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls_ca.server_cert), str(tls_ca.server_key))
    context.load_verify_locations(str(tls_ca.ca))
    context.verify_mode = ssl.CERT_REQUIRED
    url = host.add_connector("mqtts://127.0.0.1:0", ssl_context=context,
                             user_from_cert="CN")
    port = int(url.rsplit(":", 1)[1])
    client = ssl.create_default_context(cafile=str(tls_ca.ca))
    client.load_cert_chain(str(tls_ca.client_cert), str(tls_ca.client_key))  # CN=alice

    def tls_socket() -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        return client.wrap_socket(raw, server_hostname="127.0.0.1")

    with tls_socket() as alice:
        (connack,) = exchange(alice, connect_packet("alice-dev", version=5), 1)
        assert connack["code"] == 0
        (suback,) = exchange(alice, subscribe_packet(
            1, ("plant/line", 1), ("other/line", 1), version=5), 1)
        assert suback["codes"] == [1, 0x87]
    with tls_socket() as claim:
        (connack,) = exchange(claim, connect_packet(
            "claim", version=5, user="bob", password="bob-pw"), 1)
        assert connack["code"] == 0x86


@pytest.mark.parametrize(("url", "field", "says"), [
    ("mqtt://127.0.0.1:0", "CN", "only mqtts:// connectors"),
    ("mqtts://127.0.0.1:0", "nickname", "not a subject field"),
])
def test_user_from_cert_needs_a_tls_connector_and_a_subject_field(
        vm_broker_factory: Any, tls_ca: TlsFiles, url: str, field: str, says: str) -> None:
    from jmspy.errors import InvalidConfigurationException

    host, _ = vm_broker_factory()
    context = None
    if url.startswith("mqtts"):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls_ca.server_cert), str(tls_ca.server_key))
    with pytest.raises(InvalidConfigurationException, match=says):
        host.add_connector(url, ssl_context=context, user_from_cert=field)
    assert host.connectors == []
