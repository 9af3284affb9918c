"""``BrokerHost.add_connector("stomp+ssl://...")``: an in-process broker served over TLS to
other processes, its messages shared with ``vm://`` clients, certificates as identities
under its security policy, and URLs or arguments that do not fit refused clearly."""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from tls_broker import tls_client

from jmspy import InvalidConfigurationException, Queue
from jmspy.broker_ref.core.security import SecurityPolicy

WAIT = 10.0  # s: receive() timeout, generous for a loaded machine (never reached)


def server_context(files: Any, *, client_ca: bool = False) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(files.server_cert), str(files.server_key))
    if client_ca:
        context.load_verify_locations(cafile=str(files.ca))
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def test_a_stomp_ssl_connector_serves_the_vm_broker_over_tls(
        vm_broker_factory: Callable[..., Any], tls_ca: Any) -> None:
    host, factory = vm_broker_factory()
    url = host.add_connector("stomp+ssl://127.0.0.1:0", ssl_context=server_context(tls_ca))
    assert url.startswith("stomp+ssl://127.0.0.1:")
    assert host.connectors == [url]
    client = tls_client(port_of(url), tls_ca)
    assert client.connect()[0] == "CONNECTED"
    client.send("SEND", b"to vm", destination="/queue/bridge", receipt="r")
    assert client.read()[0] == "RECEIPT"
    client.close()
    with factory.create_connection() as vc:
        vc.start()
        message = vc.create_session().create_consumer(Queue("bridge")).receive(WAIT)
        assert message is not None and message.text == "to vm"


def test_a_connector_logs_a_certificate_user_in_under_the_policy(
        vm_broker_factory: Callable[..., Any], tls_ca: Any) -> None:
    policy = SecurityPolicy(iterations=1000)
    policy.add_user("alice", "alice-pw", roles=["traders"])
    policy.add_permission("orders.#", send=["traders"])
    host, _ = vm_broker_factory(security=policy)
    url = host.add_connector("stomps://127.0.0.1:0", user_from_cert="CN",
                             ssl_context=server_context(tls_ca, client_ca=True))
    alice = tls_client(port_of(url), tls_ca, cert=tls_ca.client_cert, key=tls_ca.client_key)
    assert alice.connect()[0] == "CONNECTED"  # no password: the certificate says alice
    alice.send("SEND", b"x", destination="/queue/orders.1", receipt="ok")
    assert alice.read()[0] == "RECEIPT"
    alice.send("SEND", b"x", destination="/queue/payroll", receipt="no")
    assert alice.read()[0] == "ERROR"
    alice.close()


@pytest.mark.parametrize(("url", "options", "words"), [
    ("stomp+ssl://127.0.0.1:0", {}, "needs ssl_context="),
    ("stomp://127.0.0.1:0", {"ssl_context": "ctx"}, "write stomp+ssl://HOST:PORT"),
    ("stomp+ssl://127.0.0.1:0", {"ssl_context": "ctx", "user_from_cert": "cn"},
     "user_from_cert='cn' is not a subject field"),
    ("amqp://127.0.0.1:0", {}, "give stomp://HOST:PORT or stomp+ssl://HOST:PORT"),
])
def test_a_connector_that_cannot_be_served_is_refused_saying_why(
        vm_broker_factory: Callable[..., Any], tls_ca: Any, url: str,
        options: dict[str, Any], words: str) -> None:
    host, _ = vm_broker_factory()
    if options.get("ssl_context") == "ctx":
        options["ssl_context"] = server_context(tls_ca)
    with pytest.raises(InvalidConfigurationException, match=re.escape(words)):
        host.add_connector(url, **options)
    assert host.connectors == []
