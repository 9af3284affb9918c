"""Without a CA option the client trusts the system's CAs: what ``pip install jmspy``
alone needs to reach a broker with a publicly trusted certificate.

A public CA cannot sign a test broker's certificate, so the test makes the session's
throwaway CA the system's: the client runs in a fresh interpreter with ``SSL_CERT_FILE``
naming that CA's file (OpenSSL's default verify paths, which the system's trust store
is read through, take the file from it) and no CA option at all. It connects to
``jmspy broker``'s TLS listener (stomp+ssl://) and to Mosquitto (mqtts://) and a
message makes the round trip. The same client without ``SSL_CERT_FILE`` is refused,
naming the unknown CA: so what made the difference is the default trust store, and the
default is verification.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tls_ca import TlsFiles
from tls_fixtures import tls_url_for

#: the client, with no TLS option: the URL is the scheme, host and port only
CLIENT = """
import sys, uuid
from jmspy import ConnectionFactory, Session
from jmspy.tls_errors import TLSException

url, family = sys.argv[1], sys.argv[2]
try:
    with ConnectionFactory(url).create_connection() as conn:
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        name = "system.ca." + uuid.uuid4().hex[:8]
        dest = session.create_topic(name) if family == "mqtt" else session.create_queue(name)
        consumer = session.create_consumer(dest)
        conn.start()
        session.create_producer(dest).send(session.create_text_message("default trust"))
        message = consumer.receive(10)
        print("RECEIVED", None if message is None else message.text)
except TLSException as exc:
    print("REFUSED", exc.check, "|", exc)
"""

#: guards against a hung client only (a failure, not a timing requirement)
HANG = 120.0


@pytest.fixture(params=["stomp+ssl", "mqtts"])
def tls_url(request: pytest.FixtureRequest, tmp_path: Path,
            tls_ca: TlsFiles) -> Iterator[str]:
    """stomp+ssl:// to jmspy broker's TLS listener, mqtts:// to Mosquitto's."""
    yield from tls_url_for(request, tmp_path, tls_ca)


def _run_client(url: str, cwd: Path, ca: Path | None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    if ca is not None:
        env["SSL_CERT_FILE"] = str(ca)
    family = "mqtt" if url.startswith("mqtt") else "stomp"
    done = subprocess.run([sys.executable, "-c", CLIENT, url, family], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_no_ca_option_verifies_against_the_default_trust_store(
        tls_url: str, tls_ca: TlsFiles, tmp_path: Path) -> None:
    assert _run_client(tls_url, tmp_path, tls_ca.ca) == "RECEIVED default trust"
    refused = _run_client(tls_url, tmp_path, None)
    assert refused.startswith("REFUSED unknown CA |"), refused
    assert tls_url.split("//")[1] in refused and "sslCAFile" in refused, refused
