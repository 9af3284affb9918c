"""jmspy's own ``stomp+ssl://`` client against ``jmspy broker``'s TLS listener: both ends
of TLS in this repository, meeting. Mutual TLS logs the client in by its certificate
(no password), the broker's ACLs apply to that user, a client without the CA's trust is
refused with the check named, and an address list may put the TLS listener beside the
plain one."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from test_tls_listener import identity_config, security
from tls_broker import tls_broker, tls_section

from jmspy import ConnectionFactory, JMSException, JMSSecurityException, Session


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
