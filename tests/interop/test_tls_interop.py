"""The client's TLS schemes against real brokers: Mosquitto (mqtts://, with and without a
required client certificate), RabbitMQ's STOMP and MQTT TLS listeners (stomp+ssl:// and
mqtts://, mutual TLS) and ActiveMQ 5's stomp+ssl:// connectors (with and without a
required client certificate). The brokers are tls_fixtures.py's.

Messages flow through whichever read and write path the transport takes over TLS (the
raw-socket fast paths step aside: the tests check which one ran), acknowledgements are
honoured, and a refused handshake is the TLSException that says why. The handshake
failures without a broker are in tests/test_tls_client.py.
"""

from __future__ import annotations

import logging
import shutil
import socket
import ssl
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from stomp_tls_path import assert_stomp_over_tls
from tls_brokers import TlsActiveMQ, TlsMosquitto, TlsRabbitMQ, start_tls_mosquitto
from tls_ca import KEY_PASSWORD, TlsFiles

from jmspy import ConnectionFactory, Session
from jmspy.message import TextMessage
from jmspy.tls_errors import TLSException

WAIT = 10.0


def _client_cert(tls_ca: TlsFiles) -> dict[str, Any]:
    """alice's certificate with her encrypted key: the properties of mutual TLS."""
    return {"ssl_ca_file": str(tls_ca.ca), "ssl_cert_file": str(tls_ca.client_cert),
            "ssl_key_file": str(tls_ca.client_key_encrypted),
            "ssl_key_password": KEY_PASSWORD}


#: a client without a certificate, and one with a certificate another CA signed
REFUSED = ["none", "another CA's"]


def _refused_certificate(certificate: str, tls_ca: TlsFiles) -> dict[str, Any]:
    """The properties of a client the broker must refuse: no certificate, or mallory's
    (signed by the other CA)."""
    props: dict[str, Any] = {"ssl_ca_file": str(tls_ca.ca)}
    if certificate != "none":
        props.update(ssl_cert_file=str(tls_ca.other_client_cert),
                     ssl_key_file=str(tls_ca.other_client_key))
    return props


def _certificate_refused(scheme: str, port: int, certificate: str, tls_ca: TlsFiles,
                         **props: Any) -> TLSException:
    """Connecting to ``scheme://127.0.0.1:port`` as a client the broker must refuse fails
    with a TLSException naming the client certificate and the address: that exception."""
    with pytest.raises(TLSException) as info:
        ConnectionFactory(f"{scheme}://127.0.0.1:{port}", **props,
                          **_refused_certificate(certificate, tls_ca)).create_connection()
    assert info.value.check == "client certificate", str(info.value)
    assert f"127.0.0.1:{port}" in str(info.value)
    return info.value


def _round_trip(factory: ConnectionFactory, queue: bool,
                while_open: Callable[[Any], None] = lambda transport: None) -> list[str]:
    """Send three texts and receive them with CLIENT_ACKNOWLEDGE, the first time without
    acknowledging (recover: they come back, redelivered), then acknowledged; returns the
    texts of the second delivery. ``while_open(transport)`` checks the connection's
    transport (which path it took) before it closes."""
    with factory.create_connection() as conn:
        s = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        name = f"tls.{uuid.uuid4().hex[:10]}"
        dest = s.create_queue(name) if queue else s.create_topic(name)
        c = s.create_consumer(dest)
        conn.start()
        p = s.create_producer(dest)
        for text in ("one", "two", "three"):
            p.send(s.create_text_message(text))
        first = [c.receive(WAIT) for _ in range(3)]
        assert all(isinstance(m, TextMessage) for m in first)
        s.recover()
        again = [c.receive(WAIT) for _ in range(3)]
        assert all(m is not None and m.redelivered for m in again)
        again[-1].acknowledge()
        assert c.receive(0.5) is None  # acknowledged: nothing more comes
        while_open(conn._transport)
        return [m.text for m in again]


# -- mqtts:// on Mosquitto ---------------------------------------------------------------
def test_mqtts_round_trip_and_ack_over_tls(tls_mosquitto: TlsMosquitto,
                                            tls_ca: TlsFiles) -> None:
    from jmspy.transports.mqtt import paho_private
    from jmspy.transports.mqtt.paho_private import buffered_read, direct_write

    def stepped_aside(transport: Any) -> None:
        # the raw-socket paths are installed (on the hooked path; the public path has
        # none), and step aside for paho's SSLSocket
        client = transport.paho
        hooked = paho_private.enabled()
        assert direct_write.installed(client) is hooked
        assert buffered_read.installed(client) is hooked
        assert isinstance(client.socket(), ssl.SSLSocket)
        assert buffered_read.held(client) == 0  # no block was read past paho

    url = f"mqtts://127.0.0.1:{tls_mosquitto.tls_port}?ca_file={tls_ca.ca}"
    assert _round_trip(ConnectionFactory(url), False, stepped_aside) == ["one", "two", "three"]


def test_mqtts_with_a_client_certificate_and_a_ready_context(
        tls_mosquitto: TlsMosquitto, tls_ca: TlsFiles) -> None:
    """Mutual TLS, once from the properties (encrypted key) and once from an
    ``ssl_context`` made by the application; the socket in use is TLS."""
    url = f"mqtts://127.0.0.1:{tls_mosquitto.mutual_port}"
    texts = _round_trip(ConnectionFactory(url, **_client_cert(tls_ca)), queue=False)
    assert texts == ["one", "two", "three"]
    ctx = ssl.create_default_context(cafile=str(tls_ca.ca))
    ctx.load_cert_chain(tls_ca.client_cert, tls_ca.client_key)
    with ConnectionFactory(url, ssl_context=ctx).create_connection() as conn:
        sock = conn._transport.paho.socket()
        assert isinstance(sock, ssl.SSLSocket) and type(sock) is not socket.socket
        assert sock.version() is not None  # a finished TLS handshake


@pytest.mark.parametrize("certificate", REFUSED)
def test_mqtts_without_a_good_client_certificate_is_named(
        certificate: str, tls_mosquitto: TlsMosquitto, tls_ca: TlsFiles) -> None:
    _certificate_refused("mqtts", tls_mosquitto.mutual_port, certificate, tls_ca)


def test_plain_mqtt_on_mosquittos_tls_port_and_mqtts_on_its_plain_port_are_named(
        tls_mosquitto: TlsMosquitto, tls_ca: TlsFiles) -> None:
    with pytest.raises(TLSException) as plain:
        ConnectionFactory(f"mqtt://127.0.0.1:{tls_mosquitto.tls_port}").create_connection()
    assert plain.value.check == "plain text on a TLS port"
    assert f"mqtts://127.0.0.1:{tls_mosquitto.tls_port}" in str(plain.value)
    with pytest.raises(TLSException) as tls:
        ConnectionFactory(f"mqtts://127.0.0.1:{tls_mosquitto.plain_port}?connect_timeout=3",
                          ssl_ca_file=str(tls_ca.ca)).create_connection()
    assert tls.value.check == "not a TLS port"


@pytest.mark.parametrize("listener, check, says", [
    ("wrong_host_port", "hostname", "subjectAltName"),
    ("expired_port", "expired", "has expired"),
])
def test_mosquittos_certificate_for_another_host_or_expired_is_named(
        listener: str, check: str, says: str, tls_mosquitto: TlsMosquitto,
        tls_ca: TlsFiles) -> None:
    port = getattr(tls_mosquitto, listener)
    with pytest.raises(TLSException) as info:
        ConnectionFactory(f"mqtts://127.0.0.1:{port}",
                          ssl_ca_file=str(tls_ca.ca)).create_connection()
    assert info.value.check == check, info.value
    assert f"127.0.0.1:{port}" in str(info.value) and says in str(info.value)


def test_an_mqtt_address_list_mixes_plain_and_tls_addresses(
        tls_mosquitto: TlsMosquitto, tls_ca: TlsFiles) -> None:
    """The first address refuses TCP; the second is TLS: the connection is on it."""
    from brokers import free_port

    urls = (f"mqtt://127.0.0.1:{free_port()},"
            f"mqtts://127.0.0.1:{tls_mosquitto.tls_port}?ca_file={tls_ca.ca}")
    with ConnectionFactory(urls).create_connection() as conn:
        assert conn.where == f"mqtts://127.0.0.1:{tls_mosquitto.tls_port}"
        assert isinstance(conn._transport.paho.socket(), ssl.SSLSocket)


# -- stomp+ssl:// on RabbitMQ ------------------------------------------------------------
def test_stomp_ssl_round_trip_and_ack_with_mutual_tls_on_rabbitmq(
        tls_rabbitmq: TlsRabbitMQ, tls_ca: TlsFiles) -> None:
    url = f"stomp+ssl://127.0.0.1:{tls_rabbitmq.stomp_tls_port}"
    factory = ConnectionFactory(url, imqDefaultUsername="guest", imqDefaultPassword="guest",
                                **_client_cert(tls_ca))
    assert _round_trip(factory, True, assert_stomp_over_tls) == ["one", "two", "three"]


@pytest.mark.parametrize("certificate", REFUSED)
def test_stomps_without_a_good_client_certificate_is_named_on_rabbitmq(
        certificate: str, tls_rabbitmq: TlsRabbitMQ, tls_ca: TlsFiles) -> None:
    _certificate_refused("stomps", tls_rabbitmq.stomp_tls_port, certificate, tls_ca,
                         imqDefaultUsername="guest", imqDefaultPassword="guest")


def test_plain_stomp_on_rabbitmqs_tls_port_is_told_to_use_tls(
        tls_rabbitmq: TlsRabbitMQ) -> None:
    port = tls_rabbitmq.stomp_tls_port
    with pytest.raises(TLSException) as info:
        ConnectionFactory(f"stomp://127.0.0.1:{port}?connect_timeout=5",
                          imqDefaultUsername="guest",
                          imqDefaultPassword="guest").create_connection()
    assert info.value.check == "plain text on a TLS port"
    assert f"stomp+ssl://127.0.0.1:{port}" in str(info.value)


# -- mqtts:// on RabbitMQ ----------------------------------------------------------------
def test_mqtts_round_trip_and_ack_with_mutual_tls_on_rabbitmq(
        tls_rabbitmq: TlsRabbitMQ, tls_ca: TlsFiles) -> None:
    url = f"mqtts://127.0.0.1:{tls_rabbitmq.mqtt_tls_port}"
    factory = ConnectionFactory(url, imqDefaultUsername="guest", imqDefaultPassword="guest",
                                **_client_cert(tls_ca))

    def over_tls(transport: Any) -> None:
        assert isinstance(transport.paho.socket(), ssl.SSLSocket)

    assert _round_trip(factory, False, over_tls) == ["one", "two", "three"]


@pytest.mark.parametrize("certificate", REFUSED)
def test_mqtts_without_a_good_client_certificate_is_named_on_rabbitmq(
        certificate: str, tls_rabbitmq: TlsRabbitMQ, tls_ca: TlsFiles) -> None:
    _certificate_refused("mqtts", tls_rabbitmq.mqtt_tls_port, certificate, tls_ca)


# -- stomp+ssl:// on ActiveMQ 5 ----------------------------------------------------------
def test_stomp_ssl_round_trip_and_ack_on_activemq(tls_activemq: TlsActiveMQ,
                                                  tls_ca: TlsFiles) -> None:
    url = f"stomp+ssl://127.0.0.1:{tls_activemq.stomp_tls_port}?ca_file={tls_ca.ca}"

    assert _round_trip(ConnectionFactory(url), True, assert_stomp_over_tls) == [
        "one", "two", "three"]


def test_unacked_messages_come_back_after_a_consumer_closes_on_activemq_over_tls(
        tls_activemq: TlsActiveMQ, tls_ca: TlsFiles) -> None:
    """CLIENT_ACKNOWLEDGE over stomp+ssl://: the first consumer receives both messages
    and acknowledges none, then closes; the next consumer on the queue gets both again,
    acknowledges them, and a third finds the queue empty."""
    factory = ConnectionFactory(f"stomps://127.0.0.1:{tls_activemq.stomp_tls_port}",
                                ssl_ca_file=str(tls_ca.ca))
    with factory.create_connection() as conn:
        s = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        queue = s.create_queue(f"tls.{uuid.uuid4().hex[:10]}")
        conn.start()
        p = s.create_producer(queue)
        for text in ("first", "second"):
            p.send(s.create_text_message(text))
        c = s.create_consumer(queue)
        first = [c.receive(WAIT) for _ in range(2)]
        assert [m.text for m in first if m is not None] == ["first", "second"]
        c.close()  # nothing acknowledged: ActiveMQ takes both back
        c = s.create_consumer(queue)
        again = [c.receive(WAIT) for _ in range(2)]
        assert [m.text for m in again if m is not None] == ["first", "second"]
        assert all(m is not None and m.redelivered for m in again)
        again[-1].acknowledge()
        c.close()
        c = s.create_consumer(queue)
        assert c.receive(1.0) is None  # acknowledged: gone from the queue


def test_a_client_trusting_another_ca_is_refused_by_activemq_naming_the_check(
        tls_activemq: TlsActiveMQ, tls_ca: TlsFiles) -> None:
    port = tls_activemq.stomp_tls_port
    with pytest.raises(TLSException) as info:
        ConnectionFactory(f"stomp+ssl://127.0.0.1:{port}",
                          ssl_ca_file=str(tls_ca.other_ca)).create_connection()
    assert info.value.check == "unknown CA"
    assert f"127.0.0.1:{port}" in str(info.value)


# -- mutual TLS on ActiveMQ 5 (transport.needClientAuth=true) ---------------------------
def test_stomp_ssl_round_trip_with_a_client_certificate_on_activemq(
        tls_activemq: TlsActiveMQ, tls_ca: TlsFiles) -> None:
    url = f"stomp+ssl://127.0.0.1:{tls_activemq.stomp_mutual_port}"

    texts = _round_trip(ConnectionFactory(url, **_client_cert(tls_ca)), True,
                        assert_stomp_over_tls)
    assert texts == ["one", "two", "three"]


def test_stomp_ssl_with_a_ready_context_on_activemq(tls_activemq: TlsActiveMQ,
                                                    tls_ca: TlsFiles) -> None:
    """``ssl_context=`` on stomp+ssl://: the application's context (its CA and client
    certificate) is the one the handshake uses -- jmspy runs TLS itself on the tested
    stomp.py; stomp.py's own ``set_ssl`` cannot take a context, so there it is refused."""
    from jmspy.transports.stomp import stomppy_private

    if not stomppy_private.enabled():
        pytest.skip("stomp.py's own TLS takes no ready context (refused: test_tls_client)")
    ctx = ssl.create_default_context(cafile=str(tls_ca.ca))
    ctx.load_cert_chain(tls_ca.client_cert, tls_ca.client_key)
    url = f"stomp+ssl://127.0.0.1:{tls_activemq.stomp_mutual_port}"
    texts = _round_trip(ConnectionFactory(url, ssl_context=ctx), True, assert_stomp_over_tls)
    assert texts == ["one", "two", "three"]
    bare = ssl.create_default_context(cafile=str(tls_ca.ca))  # no client certificate
    with pytest.raises(TLSException) as info:
        ConnectionFactory(url, ssl_context=bare).create_connection()
    assert info.value.check == "client certificate"


@pytest.mark.parametrize("certificate", REFUSED)
def test_activemq_requiring_a_client_certificate_refuses_a_client_without_a_good_one(
        certificate: str, tls_activemq: TlsActiveMQ, tls_ca: TlsFiles) -> None:
    """No certificate, or one the broker's trust store does not know: a TLSException
    naming host:port, the check and the fix (ActiveMQ refuses in the handshake; over TLS
    1.3 the client hears it only as the alert after its own side finished)."""
    refused = _certificate_refused("stomp+ssl", tls_activemq.stomp_mutual_port, certificate,
                                   tls_ca)
    assert "sslCertFile" in str(refused), str(refused)
    assert refused.error_code == "TLS_FAILED"


class _Seen(logging.Handler):
    """Sets ``event`` when a record's text contains ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.DEBUG)
        self.text, self.event = text, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


def test_mqtts_reconnects_over_tls_reading_the_certificate_files_again(
        tls_ca: TlsFiles, tmp_path: Path) -> None:
    """Mosquitto restarts while the client holds a connection with reconnect on; its
    certificate file is swapped meanwhile for one the broker refuses (an attempt fails,
    naming the certificate: the file was read again), then back: the connection resumes
    over TLS and messages flow."""
    mosquitto, ports = start_tls_mosquitto(tls_ca)
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    shutil.copy(tls_ca.client_cert, cert)
    shutil.copy(tls_ca.client_key, key)
    seen = _Seen("refused this client's certificate")
    jmspy_log = logging.getLogger("jmspy")
    old_level = jmspy_log.level
    jmspy_log.setLevel(logging.DEBUG)
    jmspy_log.addHandler(seen)
    events: list[str] = []
    resumed = threading.Event()

    def on_exception(error: Any) -> None:
        events.append(error.error_code)
        if error.error_code == "CONNECTION_RESUMED":
            resumed.set()

    try:
        factory = ConnectionFactory(
            f"mqtts://127.0.0.1:{ports.mutual_port}", ssl_ca_file=str(tls_ca.ca),
            ssl_cert_file=str(cert), ssl_key_file=str(key), imqReconnectEnabled=True,
            imqReconnectInterval=100, imqReconnectAttempts=-1)
        with factory.create_connection() as conn:
            conn.set_exception_listener(on_exception)
            s = conn.create_session()
            topic = s.create_topic(f"tls.{uuid.uuid4().hex[:10]}")
            c = s.create_consumer(topic)
            conn.start()
            mosquitto.stop()
            shutil.copy(tls_ca.other_client_cert, cert)  # one the broker's CA did not sign
            shutil.copy(tls_ca.other_client_key, key)
            mosquitto.start()
            assert seen.event.wait(60), events  # an attempt presented the swapped file
            shutil.copy(tls_ca.client_cert, cert)  # renewed: alice again
            shutil.copy(tls_ca.client_key, key)
            assert resumed.wait(60), events
            s.create_producer(topic).send(s.create_text_message("after"))
            got = c.receive(WAIT)
            assert got is not None and got.text == "after"
            assert isinstance(conn._transport.paho.socket(), ssl.SSLSocket)
    finally:
        jmspy_log.removeHandler(seen)
        jmspy_log.setLevel(old_level)
        mosquitto.close()
