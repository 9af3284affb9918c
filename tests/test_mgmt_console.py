"""The web console in a real headless browser (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium): the page loads, its counters move when messages
are sent, and "retry" moves a dead letter back to its queue. A screenshot of each step is
left in the test's temporary directory. A browser that cannot start fails the test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("selenium")

from mgmt_broker import DEAD_LETTERS, HANG, Running, running_broker
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from jmspy import ConnectionFactory, Session


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Running]:
    with running_broker(tmp_path, DEAD_LETTERS) as running:
        yield running


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    chromium = shutil.which("chromium")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.fail("headless Chromium is not installed: install Debian's chromium and "
                    "chromium-driver packages (.ci/setup-debian does)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--window-size=1400,900",
                f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(arg)
    try:
        driver = webdriver.Chrome(service=Service(executable_path=driver_path),
                                  options=options)
    except Exception as exc:  # the reason the browser did not start is the failure
        pytest.fail(f"headless Chromium did not start: {exc}")
    try:
        yield driver
    finally:
        driver.quit()



def _cell(driver: Any, name: str, cls: str) -> str | None:
    rows = driver.find_elements(By.CSS_SELECTOR, f'#destinations tr[data-name="{name}"]')
    if not rows:
        return None
    text: str = rows[0].find_element(By.CSS_SELECTOR, f"td.{cls}").text
    return text


def _connection_row(driver: Any, client_id: str) -> str:
    for row in driver.find_elements(By.CSS_SELECTOR, "#connections tbody tr"):
        if client_id in row.text:
            text: str = row.text
            return text
    return ""


def test_console_counters_move_and_retry(broker: Running, browser: Any,
                                         tmp_path: Path) -> None:
    # the page rebuilds its tables every second: an element found just before a rebuild
    # is stale by the time it is read, and the next poll finds the new one
    wait = WebDriverWait(browser, HANG, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException,))
    broker.send("watched", 1)
    browser.get(broker.http + "/console/")
    wait.until(lambda d: _cell(d, "watched", "depth") == "1")
    browser.save_screenshot(str(tmp_path / "console-destinations.png"))
    broker.send("watched", 3)
    wait.until(lambda d: _cell(d, "watched", "depth") == "4")
    wait.until(lambda d: _cell(d, "watched", "enqueued") == "4")

    broker.dead_letter_one("retry.jobs")  # to the DLQ
    browser.get(broker.http + "/console/#queue/DLQ")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages tbody tr")) == 1)
    wait.until(lambda d: "retry.jobs" in d.find_element(By.CSS_SELECTOR,
                                                        "#messages tbody tr").text)
    browser.save_screenshot(str(tmp_path / "console-dlq.png"))
    browser.find_element(By.ID, "retry").click()
    wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, "#messages tbody tr"))
    assert "retry.jobs" in browser.find_element(By.ID, "result").text
    status, page = broker.call("GET", "/api/queues/retry.jobs/messages")
    assert status == 200 and [m["body"] for m in page["messages"]] == ["retry.jobs-0"]

    factory = ConnectionFactory(f"stomp://127.0.0.1:{broker.stomp_port}",
                                imqConsumerFlowLimit=7, imqConsumerFlowThreshold=40)
    with factory.create_connection(client_id="console-watcher") as conn:
        conn.start()
        session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(session.create_queue("watched"))
        assert consumer.receive(HANG) is not None
        browser.get(broker.http + "/console/#connections")
        # the consumer's window: the client asked 7 at 40 %, and holds what it was sent
        wanted = ("7 (jmspy-flow-limit)", "40 %", "watched", "client")
        wait.until(lambda d: all(w in _connection_row(d, "console-watcher") for w in wanted))
        browser.save_screenshot(str(tmp_path / "console-connections.png"))
