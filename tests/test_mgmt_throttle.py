"""The management API's failed-login throttle: the STOMP listener's own (docs/security.md,
"Login throttling"), so HTTP logins are delayed and then refused per address and user
exactly as STOMP CONNECTs are, and guesses over either protocol count in one budget."""

from __future__ import annotations

import base64
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from mgmt_broker import HANG, SECURED, Running, running_broker
from prometheus_client.parser import text_string_to_metric_families

from jmspy import ConnectionFactory, JMSSecurityException

DELAY_MS = 300
#: from the 2nd failure of a user from an address attempts wait, from the 4th refused
THROTTLE = f"""
[limits]
login-delay-after = 2
login-delay-ms = {DELAY_MS}
login-refuse-after = 4
login-address-refuse-after = 0
"""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Running]:
    with running_broker(tmp_path, SECURED + THROTTLE) as running:
        yield running


def _get(broker: Running, user: str, password: str) -> tuple[int, dict[str, str], str]:
    """(status, headers, body) of ``GET /api/destinations`` as ``user``."""
    req = urllib.request.Request(broker.http + "/api/destinations")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=HANG) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def _stomp_login(broker: Running, user: str, password: str) -> None:
    factory = ConnectionFactory(f"stomp://127.0.0.1:{broker.stomp_port}")
    factory.create_connection(user, password).close()


def _throttled_total(broker: Running) -> float:
    _, text = broker.call("GET", "/metrics", auth=("scoped", "scoped-pw"))
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "jmspy_http_logins_throttled_total":
                return float(sample.value)
    raise AssertionError("no jmspy_http_logins_throttled_total in /metrics")


def test_http_logins_are_delayed_then_refused_per_address_and_user(broker: Running) -> None:
    assert _get(broker, "root", "wrong")[0] == 401
    assert _get(broker, "root", "wrong")[0] == 401
    for _ in range(2):  # past login-delay-after: each waits before its check
        started = time.monotonic()
        assert _get(broker, "root", "wrong")[0] == 401
        assert time.monotonic() - started >= DELAY_MS / 1000
    status, headers, body = _get(broker, "root", "root-pw")  # the right one, unchecked
    assert status == 429, body
    assert int(headers["Retry-After"]) >= 1
    assert "too-many-failed-logins" in body and "login-refuse-after = 4" in body
    assert _throttled_total(broker) == 1
    assert _get(broker, "app", "app-pw")[0] == 403  # another user from here: checked
    with pytest.raises(JMSSecurityException, match="too many failed logins"):
        _stomp_login(broker, "root", "root-pw")  # one budget for both protocols


def test_stomp_failures_count_against_http_logins(broker: Running) -> None:
    for _ in range(4):
        with pytest.raises(JMSSecurityException):
            _stomp_login(broker, "root", "wrong")
    status, _, body = _get(broker, "root", "root-pw")
    assert status == 429, body
    assert _get(broker, "scoped", "scoped-pw")[0] == 200
