"""jmspy's own ``stomp+ssl://`` client against ``jmspy broker``'s TLS listener: both ends
of TLS in this repository, meeting. Mutual TLS logs the client in by its certificate
(no password), the broker's ACLs apply to that user, a client without the CA's trust is
refused with the check named, and an address list may put the TLS listener beside the
plain one. And every handshake failure the client explains, met at this broker: a
certificate for another host or expired, a client certificate missing or from another
CA, plain text on the TLS port and TLS on the plain one (the same cases against bare
loopback servers are in tests/test_tls_client.py)."""

from __future__ import annotations

import contextlib
import shutil
import ssl
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from stomp_tls_path import assert_stomp_over_tls
from test_tls_listener import identity_config, security
from tls_broker import tls_broker, tls_section

from jmspy import ConnectionFactory, JMSException, JMSSecurityException, Session
from jmspy.tls_errors import TLSException
from jmspy.transports.stomp import stomppy_private


def _round_trip(factory: ConnectionFactory, queue: str, **login: str) -> str:
    with factory.create_connection(**login) as conn:
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        dest = session.create_queue(queue)
        consumer = session.create_consumer(dest)
        conn.start()
        session.create_producer(dest).send(session.create_text_message("over tls"))
        message = consumer.receive(timeout=30)
        assert message is not None
        return str(message.text)


def test_mutual_tls_logs_the_client_in_by_its_certificate_and_the_acls_apply(
        tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, identity_config(tls_ca, required=True)) as ports:
        factory = ConnectionFactory(
            f"stomp+ssl://127.0.0.1:{ports['tls']}", sslCAFile=str(tls_ca.ca),
            sslCertFile=str(tls_ca.client_cert), sslKeyFile=str(tls_ca.client_key))
        assert _round_trip(factory, "orders.tls") == "over tls"  # alice: traders
        conn = factory.create_connection()
        try:
            session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
            with pytest.raises(JMSSecurityException, match="user 'alice' may not consume"):
                session.create_consumer(session.create_queue("audit.tls"))  # auditors only
        finally:
            # The broker closes after that ERROR. A close() racing it can still wait out
            # closeTimeout over TLS (seen once in eight suite runs, not yet understood),
            # which is not what this test is about.
            with contextlib.suppress(JMSException):
                conn.close()


def test_a_client_that_does_not_trust_the_brokers_ca_is_refused_naming_the_check(
        tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, tls_section(tls_ca)) as ports:
        factory = ConnectionFactory(f"stomp+ssl://127.0.0.1:{ports['tls']}",
                                    sslCAFile=str(tls_ca.other_ca))
        with pytest.raises(JMSException) as refused:
            factory.create_connection()
        text = str(refused.value)
        assert f"127.0.0.1:{ports['tls']}" in text and "certificate" in text, text


def test_an_address_list_may_hold_the_tls_listener_beside_the_plain_one(
        tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, tls_section(tls_ca) + security()) as ports:
        factory = ConnectionFactory(
            f"stomp+ssl://127.0.0.1:{ports['tls']}?ca_file={tls_ca.ca},"
            f"stomp://127.0.0.1:{ports['plain']}")
        assert _round_trip(factory, "orders.list", user="alice",
                           password="alice-pw") == "over tls"


@pytest.mark.parametrize("served, check, says", [
    ("wrong_host", "hostname", "subjectAltName"),
    ("expired", "expired", "has expired"),
])
def test_a_broker_certificate_for_another_host_or_expired_is_named(
        served: str, check: str, says: str, tmp_path: Path, tls_ca: Any) -> None:
    bad = SimpleNamespace(server_cert=getattr(tls_ca, f"{served}_cert"),
                          server_key=getattr(tls_ca, f"{served}_key"))
    with tls_broker(tmp_path, tls_section(bad)) as ports:
        where = f"127.0.0.1:{ports['tls']}"
        with pytest.raises(TLSException) as info:
            ConnectionFactory(f"stomp+ssl://{where}",
                              ssl_ca_file=str(tls_ca.ca)).create_connection()
    assert info.value.check == check, info.value
    assert where in str(info.value) and says in str(info.value)


@pytest.mark.parametrize("certificate", ["none", "another CA's"])
def test_a_required_client_certificate_missing_or_untrusted_is_named(
        certificate: str, tmp_path: Path, tls_ca: Any) -> None:
    props: dict[str, Any] = {"ssl_ca_file": str(tls_ca.ca)}
    if certificate != "none":
        props.update(ssl_cert_file=str(tls_ca.other_client_cert),
                     ssl_key_file=str(tls_ca.other_client_key))
    extra = f'ca = "{tls_ca.ca}"\nrequire-client-cert = true\n'
    with tls_broker(tmp_path, tls_section(tls_ca, extra)) as ports:
        where = f"127.0.0.1:{ports['tls']}"
        with pytest.raises(TLSException) as info:
            ConnectionFactory(f"stomp+ssl://{where}", **props).create_connection()
    assert info.value.check == "client certificate", info.value
    assert where in str(info.value) and "sslCertFile" in str(info.value)


def test_plain_text_on_the_tls_port_and_tls_on_the_plain_port_are_named(
        tmp_path: Path, tls_ca: Any) -> None:
    with tls_broker(tmp_path, tls_section(tls_ca)) as ports:
        with pytest.raises(TLSException) as plain:
            ConnectionFactory(f"stomp://127.0.0.1:{ports['tls']}?connect_timeout=5"
                              ).create_connection()
        with pytest.raises(TLSException) as tls:
            ConnectionFactory(f"stomp+ssl://127.0.0.1:{ports['plain']}?connect_timeout=3",
                              ssl_ca_file=str(tls_ca.ca)).create_connection()
    assert plain.value.check == "plain text on a TLS port", plain.value
    assert f"stomp+ssl://127.0.0.1:{ports['tls']}" in str(plain.value)
    assert tls.value.check == "not a TLS port", tls.value
    assert f"127.0.0.1:{ports['plain']}" in str(tls.value)


owned_tls = pytest.mark.skipif(
    not stomppy_private.enabled(),
    reason="stomp.py's own TLS (an untested stomp.py or JMSPY_LIBRARY_HOOKS=0) takes "
           "neither; that refusal is tests/test_tls_client.py's")


@owned_tls
def test_a_ready_ssl_context_logs_in_by_its_client_certificate_over_stomp_ssl(
        tmp_path: Path, tls_ca: Any) -> None:
    """The application's own SSLContext is the one the handshake uses: its CA, its
    client certificate (the broker logs alice in by it) and its host name check."""
    ctx = ssl.create_default_context(cafile=str(tls_ca.ca))
    ctx.load_cert_chain(tls_ca.client_cert, tls_ca.client_key)
    with tls_broker(tmp_path, identity_config(tls_ca, required=True)) as ports:
        url = f"stomp+ssl://127.0.0.1:{ports['tls']}"
        factory = ConnectionFactory(url, ssl_context=ctx)
        assert _round_trip(factory, "orders.tls") == "over tls"  # alice: traders
        with factory.create_connection() as conn:
            sock = conn._transport._conn.transport.socket
            assert sock.version() is not None and sock.getpeercert()  # verified peer
        # the same context without the client certificate: refused, and named so
        bare = ssl.create_default_context(cafile=str(tls_ca.ca))
        with pytest.raises(TLSException) as info:
            ConnectionFactory(url, ssl_context=bare).create_connection()
        assert info.value.check == "client certificate"


@owned_tls
def test_a_ready_ssl_context_checks_the_host_name(tmp_path: Path, tls_ca: Any) -> None:
    """A broker certificate for another host, under the application's context: its
    host name check (against the URL's host, also sent as SNI) refuses it."""
    ctx = ssl.create_default_context(cafile=str(tls_ca.ca))
    bad = SimpleNamespace(server_cert=tls_ca.wrong_host_cert,
                          server_key=tls_ca.wrong_host_key)
    with tls_broker(tmp_path, tls_section(bad)) as ports, pytest.raises(TLSException) as info:
        ConnectionFactory(f"stomp+ssl://127.0.0.1:{ports['tls']}",
                          ssl_context=ctx).create_connection()
    assert info.value.check == "hostname"


@owned_tls
def test_a_ca_directory_is_trusted_over_stomp_ssl(tmp_path: Path, tls_ca: Any) -> None:
    """sslCAPath: a directory of CA certificates named by their subject hash (what
    ``openssl rehash`` makes), read by OpenSSL at the handshake."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command names the CA file by its subject hash")
    digest = subprocess.run([openssl, "x509", "-hash", "-noout", "-in", str(tls_ca.ca)],
                            check=True, capture_output=True, text=True).stdout.strip()
    cas = tmp_path / "cas"
    cas.mkdir()
    shutil.copy(tls_ca.ca, cas / f"{digest}.0")
    with tls_broker(tmp_path, tls_section(tls_ca, "only = true\n")) as ports:
        factory = ConnectionFactory(f"stomp+ssl://127.0.0.1:{ports['tls']}",
                                    ssl_ca_path=str(cas))
        assert _round_trip(factory, "orders.capath") == "over tls"
        empty = tmp_path / "none"
        empty.mkdir()
        with pytest.raises(TLSException) as info:
            ConnectionFactory(f"stomp+ssl://127.0.0.1:{ports['tls']}",
                              ssl_ca_path=str(empty)).create_connection()
        assert info.value.check == "unknown CA"


@pytest.mark.parametrize("path", ["jmspy's TLS", "stomp.py's set_ssl"])
def test_both_tls_paths_round_trip_and_name_an_unknown_ca(
        path: str, tmp_path: Path, tls_ca: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tested stomp.py runs jmspy's own TLS; any other (here: the hooks turned off,
    as an untested release or JMSPY_LIBRARY_HOOKS=0 does) stomp.py's ``set_ssl``. Both
    deliver, both are TLS (never a plain socket), both name a CA they do not trust."""
    if path == "stomp.py's set_ssl":
        monkeypatch.setattr(stomppy_private, "enabled", lambda: False)
    elif not stomppy_private.enabled():
        pytest.skip("this stomp.py takes the public path only")
    with tls_broker(tmp_path, tls_section(tls_ca, "only = true\n")) as ports:
        url = f"stomp+ssl://127.0.0.1:{ports['tls']}"
        factory = ConnectionFactory(url, ssl_ca_file=str(tls_ca.ca))
        with factory.create_connection() as conn:
            assert_stomp_over_tls(conn._transport)
        assert _round_trip(factory, f"paths.{len(path)}") == "over tls"
        with pytest.raises(TLSException) as info:
            ConnectionFactory(url, ssl_ca_file=str(tls_ca.other_ca)).create_connection()
        assert info.value.check == "unknown CA"


def test_a_message_larger_than_one_write_piece_arrives_whole_over_stomp_ssl(
        tmp_path: Path, tls_ca: Any) -> None:
    """A body written in several pieces (owned_tls.WRITE_PIECE) and read back across
    many TLS records and reads: every byte, in order."""
    from jmspy.transports.stomp.owned_tls import WRITE_PIECE

    body = bytes(range(256)) * (2 * WRITE_PIECE // 256 + 7)
    with tls_broker(tmp_path, tls_section(tls_ca, "only = true\n")) as ports:
        factory = ConnectionFactory(f"stomp+ssl://127.0.0.1:{ports['tls']}",
                                    ssl_ca_file=str(tls_ca.ca))
        with factory.create_connection() as conn:
            session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
            queue = session.create_queue("large.tls")
            consumer = session.create_consumer(queue)
            conn.start()
            session.create_producer(queue).send(session.create_bytes_message(body))
            got = consumer.receive(timeout=30)
            assert_stomp_over_tls(conn._transport)
    assert got is not None and got.body == body
