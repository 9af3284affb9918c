"""``jmspy broker``'s TLS listener, tested with clients that are not jmspy: the standard
library's ``ssl`` speaking raw STOMP frames, and stomp.py's ``set_ssl``. Round trips over
TLS, plain and TLS side by side or TLS alone, client certificates required (missing or
from another CA: refused), certificates as identities under the ACLs, and a plain-text
client on the TLS port dropped without stopping the broker."""

from __future__ import annotations

import logging
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest
import stomp
from stomp_support import Collector
from tls_broker import HANG, plain_client, tls_broker, tls_client, tls_section

from jmspy.broker_ref.core.security import hash_password


def round_trip(client: Any, queue: str = "/queue/tls.q") -> bytes:
    """SEND with a receipt, SUBSCRIBE, and the MESSAGE's body."""
    client.send("SEND", b"over tls", destination=queue, receipt="r1")
    command, headers, _ = client.read()
    assert (command, headers.get("receipt-id")) == ("RECEIPT", "r1"), headers
    client.send("SUBSCRIBE", destination=queue, id="s1", ack="auto")
    command, headers, body = client.read()
    assert command == "MESSAGE", (command, headers)
    return body


def test_a_raw_tls_client_round_trips_a_message(tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, tls_section(tls_ca)) as ports:
        client = tls_client(ports["tls"], tls_ca)
        command, headers, _ = client.connect()
        assert command == "CONNECTED", headers
        assert client.sock.version() in ("TLSv1.2", "TLSv1.3")  # type: ignore[attr-defined]
        assert round_trip(client) == b"over tls"
        client.close()


def test_plain_and_tls_listeners_serve_the_same_broker(tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, tls_section(tls_ca)) as ports:
        assert ports["plain"] != ports["tls"]
        plain = plain_client(ports["plain"])
        assert plain.connect()[0] == "CONNECTED"
        plain.send("SEND", b"from plain", destination="/queue/both", receipt="p")
        assert plain.read()[0] == "RECEIPT"
        secure = tls_client(ports["tls"], tls_ca)
        assert secure.connect()[0] == "CONNECTED"
        secure.send("SUBSCRIBE", destination="/queue/both", id="s", ack="auto")
        assert secure.read()[2] == b"from plain"
        plain.close()
        secure.close()


def test_tls_only_serves_no_plain_port(tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, tls_section(tls_ca, "only = true\n")) as ports:
        assert "plain" not in ports
        client = tls_client(ports["tls"], tls_ca)
        assert client.connect()[0] == "CONNECTED"
        assert round_trip(client) == b"over tls"
        client.close()


def test_stomp_py_with_set_ssl_round_trips_over_tls(tmp_path: Path, tls_ca: Any) -> None:
    extra = f'ca = "{tls_ca.ca}"\nrequire-client-cert = true\n'
    with tls_broker(tmp_path, tls_section(tls_ca, extra)) as ports:
        where = ("127.0.0.1", ports["tls"])
        conn = stomp.Connection12([where], heartbeats=(0, 0))
        conn.set_ssl(for_hosts=[where], ca_certs=str(tls_ca.ca),
                     cert_file=str(tls_ca.client_cert), key_file=str(tls_ca.client_key))
        listener = Collector()
        conn.set_listener("c", listener)
        conn.connect(wait=True, headers={"host": "/"})
        try:
            conn.subscribe("/queue/stomppy", id="1", ack="auto")
            conn.send("/queue/stomppy", "hello over tls", receipt="x")
            (message,) = listener.wait_messages(1, HANG)
            assert message.body == "hello over tls"
        finally:
            conn.disconnect()


def refused(client_factory: Any) -> str:
    """What a client the TLS listener must refuse gets: an error or a closed socket,
    never CONNECTED (under TLS 1.3 the client's handshake ends before the server has
    checked its certificate, so the refusal may come at the first read)."""
    try:
        client = client_factory()
        command, _, _ = client.connect()
    except (ssl.SSLError, ConnectionError) as exc:
        return type(exc).__name__
    assert command != "CONNECTED"
    client.close()
    return "closed"


def test_required_client_certificates_refuse_clients_without_one_or_from_another_ca(
        tmp_path: Path, tls_ca: Any, caplog: pytest.LogCaptureFixture) -> None:
    extra = f'ca = "{tls_ca.ca}"\nrequire-client-cert = true\n'
    with (caplog.at_level(logging.INFO, logger="jmspy.broker.tls"),
          tls_broker(tmp_path, tls_section(tls_ca, extra)) as ports):
        refused(lambda: tls_client(ports["tls"], tls_ca))
        refused(lambda: tls_client(ports["tls"], tls_ca, cert=tls_ca.other_client_cert,
                                   key=tls_ca.other_client_key))
        alice = tls_client(ports["tls"], tls_ca, cert=tls_ca.client_cert,
                           key=tls_ca.client_key)
        assert alice.connect()[0] == "CONNECTED"  # the broker still serves
        alice.close()
    failures = [r.getMessage() for r in caplog.records if r.name == "jmspy.broker.tls"]
    assert len(failures) == 2, failures
    assert all("TLS handshake with 127.0.0.1:" in line and "CERTIFICATE" in line
               for line in failures), failures


def test_a_plain_text_client_on_the_tls_port_is_dropped_and_the_broker_serves_on(
        tmp_path: Path, tls_ca: Any, caplog: pytest.LogCaptureFixture) -> None:
    with (caplog.at_level(logging.INFO, logger="jmspy.broker.tls"),
          tls_broker(tmp_path, tls_section(tls_ca)) as ports):
        plain = plain_client(ports["tls"])
        plain.send("CONNECT", accept_version="1.2", host="/")
        answer = b""
        try:
            while chunk := plain.sock.recv(65536):
                answer += chunk
        except ConnectionError:
            pass  # a reset is a drop too
        assert b"CONNECTED" not in answer
        plain.close()
        client = tls_client(ports["tls"], tls_ca)
        assert client.connect()[0] == "CONNECTED"
        client.close()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "jmspy.broker.tls"]
    assert "plain text to the TLS port" in line


def security(extra: str = "") -> str:
    alice = hash_password("alice-pw", iterations=1000)
    bob = hash_password("bob-pw", iterations=1000)
    return (f'[security]\n[security.users.alice]\npassword-hash = "{alice}"\n'
            f'roles = ["traders"]\n[security.users.bob]\npassword-hash = "{bob}"\n'
            'roles = ["auditors"]\n'
            '[[security.permissions]]\nmatch = "orders.#"\nsend = ["traders"]\n'
            'consume = ["traders"]\n'
            '[[security.permissions]]\nmatch = "audit.#"\nconsume = ["auditors"]\n'
            'send = ["auditors"]\n' + extra)


def identity_config(files: Any, *, required: bool) -> str:
    extra = (f'ca = "{files.ca}"\nidentity-as-user = true\n'
             f'require-client-cert = {"true" if required else "false"}\n')
    return tls_section(files, extra) + security()


def test_a_client_certificate_logs_alice_in_without_a_password_and_her_acls_apply(
        tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, identity_config(tls_ca, required=True)) as ports:
        alice = tls_client(ports["tls"], tls_ca, cert=tls_ca.client_cert,
                           key=tls_ca.client_key)
        command, headers, _ = alice.connect()  # no login, no passcode
        assert command == "CONNECTED", headers
        assert round_trip(alice, "/queue/orders.new") == b"over tls"  # traders may
        alice.send("SEND", b"x", destination="/queue/audit.log", receipt="r2")
        command, headers, _ = alice.read()
        assert command == "ERROR"  # auditors only
        assert "alice" in headers.get("message", "") + str(headers), headers
        alice.close()


def test_a_certificate_cannot_log_in_as_another_user(tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, identity_config(tls_ca, required=True)) as ports:
        alice = tls_client(ports["tls"], tls_ca, cert=tls_ca.client_cert,
                           key=tls_ca.client_key)
        command, _, body = alice.connect(login="bob", passcode="bob-pw")
        assert command == "ERROR"
        assert b"names user 'alice' but CONNECT asks for 'bob'" in body
        alice.close()


def test_without_a_certificate_the_password_logs_in_and_decides_the_acls(
        tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, identity_config(tls_ca, required=False)) as ports:
        anonymous = tls_client(ports["tls"], tls_ca)
        assert anonymous.connect()[0] == "ERROR"  # no certificate, no login: refused
        anonymous.close()
        bob = tls_client(ports["tls"], tls_ca)
        assert bob.connect(login="bob", passcode="bob-pw")[0] == "CONNECTED"
        assert round_trip(bob, "/queue/audit.log") == b"over tls"
        bob.close()


def test_the_plain_listener_never_takes_a_certificate_identity(
        tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, identity_config(tls_ca, required=True)) as ports:
        plain = plain_client(ports["plain"])
        assert plain.connect()[0] == "ERROR"  # no password: security refuses
        plain.close()


def test_an_idle_socket_on_the_tls_port_does_not_block_other_clients(
        tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, tls_section(tls_ca)) as ports:
        silent = socket.create_connection(("127.0.0.1", ports["tls"]), timeout=HANG)
        client = tls_client(ports["tls"], tls_ca)
        assert client.connect()[0] == "CONNECTED"
        client.close()
        silent.close()
