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
from tls_broker import HANG, RawStomp, plain_client, tls_broker, tls_client, tls_section

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


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_required_client_certificates_refuse_clients_without_one_or_from_another_ca(
        tmp_path: Path, tls_ca: Any, caplog: pytest.LogCaptureFixture, loop: str) -> None:
    extra = f'ca = "{tls_ca.ca}"\nrequire-client-cert = true\n'
    with (caplog.at_level(logging.INFO, logger="jmspy.broker.tls"),
          tls_broker(tmp_path, tls_section(tls_ca, extra), loop) as ports):
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
               and "not signed by [broker.tls] ca" in line for line in failures), failures


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_plain_text_client_on_the_tls_port_is_dropped_and_the_broker_serves_on(
        tmp_path: Path, tls_ca: Any, caplog: pytest.LogCaptureFixture, loop: str) -> None:
    with (caplog.at_level(logging.INFO, logger="jmspy.broker.tls"),
          tls_broker(tmp_path, tls_section(tls_ca), loop) as ports):
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


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_client_certificate_logs_alice_in_without_a_password_and_her_acls_apply(
        tmp_path: Path, tls_ca: Any, loop: str) -> None:
    with tls_broker(tmp_path, identity_config(tls_ca, required=True), loop) as ports:
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


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_client_that_never_starts_the_handshake_is_dropped_after_the_connect_timeout(
        tmp_path: Path, tls_ca: Any, caplog: pytest.LogCaptureFixture, loop: str) -> None:
    toml = tls_section(tls_ca).replace("heartbeat-ms = 0\n", "heartbeat-ms = 0\n"
                                                             "connect-timeout = 1\n")
    with (caplog.at_level(logging.INFO, logger="jmspy.broker.tls"),
          tls_broker(tmp_path, toml, loop) as ports):
        silent = socket.create_connection(("127.0.0.1", ports["tls"]), timeout=HANG)
        assert silent.recv(100) == b""  # blocks until the broker gives up on it (1 s)
        silent.close()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "jmspy.broker.tls"]
    assert "no handshake completed within 1 s" in line


def test_min_version_tls13_refuses_a_tls12_client(tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, tls_section(tls_ca, 'min-version = "TLSv1.3"\n')) as ports:
        context = ssl.create_default_context(cafile=str(tls_ca.ca))
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        sock = socket.create_connection(("127.0.0.1", ports["tls"]), timeout=HANG)
        with pytest.raises(ssl.SSLError):
            context.wrap_socket(sock, server_hostname="localhost")
        sock.close()
        modern = tls_client(ports["tls"], tls_ca)
        assert modern.sock.version() == "TLSv1.3"  # type: ignore[attr-defined]
        modern.close()


def test_an_encrypted_key_with_its_password_file_serves(tmp_path: Path, tls_ca: Any) -> None:
    from tls_ca import KEY_PASSWORD

    (tmp_path / "key.pw").write_text(KEY_PASSWORD + "\n", encoding="utf-8")
    toml = (f'[broker]\nport = 0\n[broker.tls]\nport = 0\nonly = true\n'
            f'cert = "{tls_ca.client_cert}"\nkey = "{tls_ca.client_key_encrypted}"\n'
            'key-password-file = "key.pw"\n')
    with tls_broker(tmp_path, toml) as ports:
        # that certificate is alice's (a client certificate, no host name): only a client
        # that checks nothing accepts it, which is enough to show the key was loaded
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        sock = context.wrap_socket(socket.create_connection(("127.0.0.1", ports["tls"]),
                                                            timeout=HANG))
        assert RawStomp(sock).connect()[0] == "CONNECTED"
        sock.close()


def test_a_client_that_distrusts_the_broker_certificate_is_logged_as_such(
        tmp_path: Path, tls_ca: Any, caplog: pytest.LogCaptureFixture) -> None:
    with (caplog.at_level(logging.INFO, logger="jmspy.broker.tls"),
          tls_broker(tmp_path, tls_section(tls_ca)) as ports):
        context = ssl.create_default_context(cafile=str(tls_ca.other_ca))
        sock = socket.create_connection(("127.0.0.1", ports["tls"]), timeout=HANG)
        with pytest.raises(ssl.SSLCertVerificationError):
            context.wrap_socket(sock, server_hostname="localhost")
        sock.close()
        client = tls_client(ports["tls"], tls_ca)  # the next client is served
        assert client.connect()[0] == "CONNECTED"
        client.close()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "jmspy.broker.tls"]
    assert "sent by the client: it does not accept the broker's certificate" in line
