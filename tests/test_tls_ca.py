"""The test CA's certificates do what the TLS tests rely on: the server certificate is
accepted for 127.0.0.1 and localhost by a client trusting the CA, with a client
certificate the server checks; each failure certificate fails the check it is for.

Handshakes run in memory (``ssl.MemoryBIO``), no sockets."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
from tls_ca import KEY_PASSWORD


def _handshake(client: ssl.SSLContext, server: ssl.SSLContext, host: str) -> None:
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(c_in, c_out, server_hostname=host)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    c_done = s_done = False
    for _ in range(20):
        for obj, done_flag in ((c, "c"), (s, "s")):
            try:
                obj.do_handshake()
                if done_flag == "c":
                    c_done = True
                else:
                    s_done = True
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if c_done and s_done:
            return
    raise AssertionError("the handshake did not finish")


def _server(cert: Path, key: Path, ca: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    if ca is not None:
        ctx.load_verify_locations(ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _client(ca: Path, cert: Path | None = None, key: Path | None = None,
            password: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(cert, key, password=password)
    return ctx


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_the_server_certificate_is_good_for_loopback_with_a_client_certificate(
        tls_ca: Any, host: str) -> None:
    _handshake(_client(tls_ca.ca, tls_ca.client_cert, tls_ca.client_key_encrypted,
                       KEY_PASSWORD),
               _server(tls_ca.server_cert, tls_ca.server_key, tls_ca.ca), host)


@pytest.mark.parametrize(("server", "trust", "says"), [
    (("server_cert", "server_key"), "other_ca", "unable to get local issuer certificate"),
    (("wrong_host_cert", "wrong_host_key"), "ca", "IP address mismatch"),
    (("expired_cert", "expired_key"), "ca", "certificate has expired"),
])
def test_each_failure_certificate_fails_its_check(
        tls_ca: Any, server: tuple[str, str], trust: str, says: str) -> None:
    cert, key = (getattr(tls_ca, name) for name in server)
    with pytest.raises(ssl.SSLCertVerificationError, match=says):
        _handshake(_client(getattr(tls_ca, trust)), _server(cert, key), "127.0.0.1")


def test_a_client_certificate_of_another_ca_is_refused(tls_ca: Any) -> None:
    with pytest.raises(ssl.SSLError):
        _handshake(_client(tls_ca.ca, tls_ca.other_client_cert, tls_ca.other_client_key),
                   _server(tls_ca.server_cert, tls_ca.server_key, tls_ca.ca), "127.0.0.1")
