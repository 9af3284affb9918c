"""A real Prometheus (Debian's ``prometheus`` package, installed by .ci/setup-debian)
scrapes a secured broker's ``/metrics`` with HTTP basic credentials, and its own query
API then holds a jmspy series. A Prometheus that cannot start fails the test, saying why:
it is part of what is tested, not an optional extra."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from brokers import free_port
from mgmt_broker import HANG, SECURED, Running, running_broker
from polling import wait_until

from jmspy import ConnectionFactory


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Running]:
    with running_broker(tmp_path, SECURED) as broker:
        yield broker


@pytest.fixture
def prometheus(tmp_path: Path, secured: Running) -> Iterator[str]:
    """Prometheus scraping ``secured`` every second: its base URL."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("the prometheus binary is not on PATH: install Debian's prometheus "
                    "package (.ci/setup-debian does)")
    target = secured.http.removeprefix("http://")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: jmspy\n    metrics_path: /metrics\n"
        "    basic_auth:\n      username: root\n      password: root-pw\n"
        f"    static_configs:\n      - targets: ['{target}']\n")
    port = free_port()
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            return True
        try:
            with urllib.request.urlopen(base + "/-/ready", timeout=5) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    try:
        if not wait_until(ready, HANG, 0.1) or proc.poll() is not None:
            log.flush()
            pytest.fail("prometheus did not start: "
                        + (tmp_path / "prometheus.log").read_text()[-2000:])
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=HANG)
        log.close()


def _query(base: str, expr: str) -> list[dict[str, object]]:
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=HANG) as resp:
        answer = json.loads(resp.read())
    assert answer["status"] == "success", answer
    result: list[dict[str, object]] = answer["data"]["result"]
    return result


def test_prometheus_scrapes_the_broker(secured: Running, prometheus: str) -> None:
    factory = ConnectionFactory(f"stomp://127.0.0.1:{secured.stomp_port}")
    with factory.create_connection("root", "root-pw") as conn:
        session = conn.create_session()
        producer = session.create_producer(session.create_queue("scraped"))
        for i in range(3):
            producer.send(session.create_text_message(str(i)))
    expr = 'jmspy_destination_messages{destination="scraped"}'
    assert wait_until(lambda: bool(_query(prometheus, expr)), HANG, 0.2), (
        "no jmspy series in Prometheus; its targets: "
        + urllib.request.urlopen(prometheus + "/api/v1/targets", timeout=HANG).read()
        .decode()[-2000:])
    (series,) = _query(prometheus, expr)
    value = series["value"]
    assert isinstance(value, list) and float(value[1]) == 3, series
    up = _query(prometheus, 'up{job="jmspy"}')
    assert up and float(up[0]["value"][1]) == 1  # type: ignore[index]
