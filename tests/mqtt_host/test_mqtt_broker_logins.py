"""``jmspy broker``'s MQTT logins as its STOMP ones, in a real broker process: with
``[broker.tls] identity-as-user`` a client certificate logs its user in over MQTT
(no password; that user's ACLs apply; it cannot claim another user's name), and failed
logins over STOMP and MQTT count against one throttle."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mqtt_pair import connect_packet, subscribe_packet
from mqtt_process import WAIT, BrokerProcess, exchange
from tls_ca import TlsFiles

from jmspy.broker_ref.core.security import hash_password


def _security() -> str:
    alice = hash_password("alice-pw", iterations=1000)
    bob = hash_password("bob-pw", iterations=1000)
    return (f'[security]\n[security.users.alice]\npassword-hash = "{alice}"\n'
            'roles = ["traders"]\n'
            f'[security.users.bob]\npassword-hash = "{bob}"\nroles = ["auditors"]\n'
            '[[security.permissions]]\nmatch = "orders.#"\nsend = ["traders"]\n'
            'consume = ["traders"]\n'
            '[[security.permissions]]\nmatch = "audit.#"\nsend = ["auditors"]\n'
            'consume = ["auditors"]\n')


@contextmanager
def _broker(tmp_path: Path, toml: str, *args: str) -> Iterator[dict[str, int]]:
    """A broker process serving ``toml``; its ports by what each line announces."""
    broker = BrokerProcess(tmp_path, "--in-memory", *args, toml=toml)
    try:
        yield broker.start()
    finally:
        broker.stop()


def _tls(port: int, files: TlsFiles) -> socket.socket:
    context = ssl.create_default_context(cafile=str(files.ca))
    context.load_cert_chain(str(files.client_cert), str(files.client_key))  # CN=alice
    raw = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def _identity(files: TlsFiles) -> str:
    return (f'[broker.tls]\ncert = "{files.server_cert}"\nkey = "{files.server_key}"\n'
            f'ca = "{files.ca}"\nidentity-as-user = true\nrequire-client-cert = true\n'
            + _security())


def test_a_client_certificate_logs_its_user_in_over_mqtt_and_her_acls_apply(
        tmp_path: Path, tls_ca: TlsFiles) -> None:
    with _broker(tmp_path, _identity(tls_ca), "--tls-port", "0",
                 "--mqtt-tls-port", "0") as ports, _tls(ports["mqtts"], tls_ca) as alice:
        (connack,) = exchange(alice, connect_packet("alice-dev", version=5), 1)
        assert connack["code"] == 0  # no user name, no password: the certificate
        (suback,) = exchange(alice, subscribe_packet(
            1, ("orders/#", 1), ("audit/#", 1), version=5), 1)
        assert suback["codes"] == [1, 0x87]  # a trader, not an auditor


def test_a_certificate_cannot_log_in_over_mqtt_as_another_user(
        tmp_path: Path, tls_ca: TlsFiles) -> None:
    with _broker(tmp_path, _identity(tls_ca), "--tls-port", "0",
                 "--mqtt-tls-port", "0") as ports, _tls(ports["mqtts"], tls_ca) as alice:
        (connack,) = exchange(alice, connect_packet(
            "x", version=5, user="bob", password="bob-pw"), 1)
        assert connack["code"] == 0x86
        assert "names user 'alice' but CONNECT asks for 'bob'" in (
            connack["props"]["reason_string"])


def test_failed_stomp_logins_count_against_mqtt_logins_from_that_address(
        tmp_path: Path) -> None:
    toml = _security() + "[limits]\nlogin-delay-after = 5\nlogin-refuse-after = 2\n"
    with _broker(tmp_path, toml, "--mqtt-port", "0") as ports:
        for _ in range(2):
            with socket.create_connection(("127.0.0.1", ports["stomp"]), WAIT) as stomp:
                stomp.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nlogin:alice\n"
                              b"passcode:guess\n\n\0")
                assert stomp.recv(65536).startswith(b"ERROR")
        with socket.create_connection(("127.0.0.1", ports["mqtt"]), WAIT) as mqtt:
            (connack,) = exchange(mqtt, connect_packet(
                "dev", version=5, user="alice", password="alice-pw"), 1)
            assert connack["code"] == 0x9F  # the right password, refused unchecked
