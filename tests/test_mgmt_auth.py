"""The management API's security: every endpoint x (no credentials, wrong password, a
user without ``admin`` on what it touches, an admin) answers the right status."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from mgmt_broker import NO_THROTTLE, SECURED, Running, running_broker
from prometheus_client.parser import text_string_to_metric_families

from jmspy import ConnectionFactory, JMSSecurityException

#: (method, path, body, status for the admin) -- the admin's status is what the endpoint
#: answers once allowed (404: the message or connection named does not exist)
ENDPOINTS: list[tuple[str, str, Any, int]] = [
    ("GET", "/metrics", None, 200),
    ("GET", "/console/", None, 200),
    ("GET", "/console/console.js", None, 200),
    ("GET", "/api/destinations", None, 200),
    ("GET", "/api/destinations/queue/orders", None, 200),
    ("GET", "/api/queues/orders/messages?offset=0&limit=10", None, 200),
    ("DELETE", "/api/queues/orders/messages/ID%3Anone", None, 404),
    ("POST", "/api/queues/orders/messages/ID%3Anone/move", {"to": "other"}, 404),
    ("POST", "/api/queues/orders/retry", None, 200),
    ("DELETE", "/api/queues/orders/messages", None, 200),
    ("GET", "/api/connections", None, 200),
    ("DELETE", "/api/connections/999999", None, 404),
]


#: what any user with valid credentials may load
ANY_USER = {"/console/", "/console/console.js"}
#: what a user who administers some destinations (not "orders") may call
SCOPED_ALLOWED = {"/metrics", "/console/", "/console/console.js", "/api/destinations",
                  "/api/connections",
                  "/api/connections/999999"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    # the matrix sends two wrong logins per endpoint: the failed-login throttle (tested in
    # test_mgmt_throttle.py) is off here, so each answers for itself
    with running_broker(tmp_path_factory.mktemp("secured"), SECURED + NO_THROTTLE) as broker:
        factory = ConnectionFactory(f"stomp://127.0.0.1:{broker.stomp_port}")
        with factory.create_connection("root", "root-pw") as conn:
            session = conn.create_session()
            for name in ("orders", "other"):
                session.create_producer(session.create_queue(name)).send(
                    session.create_text_message(name))
        yield broker


@pytest.mark.parametrize(("method", "path", "body", "ok"), ENDPOINTS,
                         ids=[f"{m} {p}" for m, p, _, _ in ENDPOINTS])
@pytest.mark.parametrize(("who", "expected"), [
    (None, 401), (("root", "wrong"), 401), (("nobody", "x"), 401), (("app", "app-pw"), 403),
    (("scoped", "scoped-pw"), 403), (("root", "root-pw"), None)])
def test_status(secured: Running, method: str, path: str, body: Any, ok: int,
                who: tuple[str, str] | None, expected: int | None) -> None:
    if who is not None and who[1].endswith("-pw") and path in ANY_USER:
        expected = None  # the console's static pages: any logged-in user (its API calls
        # are what the permissions guard)
    if who is not None and who[0] == "scoped" and path in SCOPED_ALLOWED:
        expected = None  # administers team.#: broker-wide reads, its own slice of them
    status, answer = secured.call(method, path, body, auth=who)
    want = ok if expected is None else expected
    assert status == want, (status, answer)
    if status >= 400:
        assert answer["error"] and answer["message"], answer


def test_401_challenges_for_basic(secured: Running) -> None:
    status, answer = secured.call("GET", "/api/destinations")
    assert status == 401
    assert "curl -u" in answer["message"]


def test_scoped_admin_sees_only_its_destinations(secured: Running) -> None:
    factory = ConnectionFactory(f"stomp://127.0.0.1:{secured.stomp_port}")
    with factory.create_connection("scoped", "scoped-pw") as conn:
        session = conn.create_session()
        session.create_producer(session.create_queue("team.jobs")).send(
            session.create_text_message("x"))
    status, answer = secured.call("GET", "/api/destinations", auth=("scoped", "scoped-pw"))
    assert status == 200
    names = {d["name"] for d in answer["destinations"]}
    assert "team.jobs" in names and "orders" not in names, names
    status, answer = secured.call("GET", "/api/queues/team.jobs/messages",
                                  auth=("scoped", "scoped-pw"))
    assert status == 200 and answer["total"] == 1, answer
    status, _ = secured.call("POST", "/api/queues/team.jobs/messages/x/move",
                             {"to": "orders"}, auth=("scoped", "scoped-pw"))
    assert status == 403  # may not administer the target


def _sample(secured: Running, name: str, **labels: str) -> float:
    _, text = secured.call("GET", "/metrics", auth=("root", "root-pw"))
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"no {name}{labels} in /metrics")


def test_refused_logins_counted(secured: Running) -> None:
    before = _sample(secured, "jmspy_http_logins_refused_total")
    assert secured.call("GET", "/api/destinations", auth=("root", "bad"))[0] == 401
    assert _sample(secured, "jmspy_http_logins_refused_total") == before + 1
    stomp_before = _sample(secured, "jmspy_broker_connections_refused_total",
                           reason="authentication")
    factory = ConnectionFactory(f"stomp://127.0.0.1:{secured.stomp_port}")
    with pytest.raises(JMSSecurityException):
        factory.create_connection("root", "bad").close()
    assert _sample(secured, "jmspy_broker_connections_refused_total",
                   reason="authentication") == stomp_before + 1


def test_connections_by_state(secured: Running) -> None:
    factory = ConnectionFactory(f"stomp://127.0.0.1:{secured.stomp_port}")
    before = _sample(secured, "jmspy_broker_connections_by_state", state="open")
    with factory.create_connection("app", "app-pw"):
        assert _sample(secured, "jmspy_broker_connections_by_state",
                       state="open") == before + 1
        assert _sample(secured, "jmspy_broker_connections_by_state",
                       state="connecting") == 0
