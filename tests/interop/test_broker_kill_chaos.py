"""Chaos on one node: ``jmspy broker`` is SIGKILLed mid-stream under an acknowledging
listener and started again on the same port with its store.

300 persistent messages wait in a queue; a listener (2 ms of work per message, window
20) takes them in AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE (acknowledge() per message) or a
transacted session (commit() per message). Once a third has been handled the broker is
killed -- no flush, no close -- and restarted on its data directory. Outcome asserted:
every message delivered; a message seen twice was marked redelivered the second time
(JMSRedelivered, delivery count above 1); the listener resumes after
CONNECTION_RESUMED and its session's dispatcher thread is alive. Elapsed time is not
asserted.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from jmspy_process import JmspyBroker
from jmspy_process import stored_broker as stored_broker  # the fixture

from jmspy import ConnectionFactory, JMSException, Session, reconnect

N = 300
MODES = {"auto": (False, Session.AUTO_ACKNOWLEDGE),
         "client": (False, Session.CLIENT_ACKNOWLEDGE),
         "transacted": (True, Session.AUTO_ACKNOWLEDGE)}


@pytest.fixture(autouse=True)
def _prompt_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The doubling backoff capped at 0.5 s: the restart test waits for the broker, not
    for a 30 s backoff step (its shape is test_reconnect_policy.py's business)."""
    monkeypatch.setattr(reconnect, "MAX_INTERVAL", 0.5)



class Worker:
    """The listener: works 2 ms, acknowledges as its mode says, records each delivery."""

    def __init__(self, session: Any, mode: str) -> None:
        self.session, self.mode = session, mode
        self.seen: list[tuple[str, bool, int]] = []  # text, redelivered, delivery count
        self.resumed_at: int | None = None  # len(seen) when CONNECTION_RESUMED was heard
        self.failures: list[str] = []
        self.cond = threading.Condition()

    def __call__(self, message: Any) -> None:
        time.sleep(0.002)  # the listener's work: keeps messages in flight at the kill
        try:
            if self.mode == "client":
                message.acknowledge()
            elif self.mode == "transacted":
                self.session.commit()
        except JMSException as exc:  # the broker died under the ack: it redelivers
            self.failures.append(exc.error_code)
        with self.cond:
            self.seen.append((message.text, message.redelivered, message.delivery_count))
            self.cond.notify_all()

    def on_exception(self, error: JMSException) -> None:
        if error.error_code == "CONNECTION_RESUMED":
            with self.cond:
                self.resumed_at = len(self.seen)
                self.cond.notify_all()

    def wait(self, predicate: Any, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(predicate, timeout)

    def distinct(self) -> set[str]:
        return {text for text, _, _ in self.seen}


@pytest.mark.parametrize("mode", list(MODES))
def test_sigkill_mid_stream_loses_nothing_and_marks_every_duplicate(
        stored_broker: JmspyBroker, mode: str) -> None:
    queue_name = f"chaos.{mode}.{uuid.uuid4().hex[:8]}"
    loader = ConnectionFactory(stored_broker.url).create_connection()
    try:
        session = loader.create_session(False, Session.AUTO_ACKNOWLEDGE)
        producer = session.create_producer(session.create_queue(queue_name))
        for i in range(N):  # PERSISTENT: stored before send() returns
            producer.send(session.create_text_message(f"m{i:03d}"))
    finally:
        loader.close()

    conn = ConnectionFactory(
        stored_broker.url, imqReconnectEnabled=True, imqReconnectInterval=100,
        imqReconnectAttempts=200, imqConsumerFlowLimit=20).create_connection()
    try:
        transacted, ack_mode = MODES[mode]
        session = conn.create_session(transacted, ack_mode)
        worker = Worker(session, mode)
        conn.set_exception_listener(worker.on_exception)
        session.create_consumer(session.create_queue(queue_name)).set_message_listener(worker)
        conn.start()
        assert worker.wait(lambda: len(worker.seen) >= N // 3, 60), len(worker.seen)

        stored_broker.kill()
        stored_broker.start()

        assert worker.wait(lambda: worker.resumed_at is not None, 60), "no CONNECTION_RESUMED"
        all_texts = {f"m{i:03d}" for i in range(N)}
        assert worker.wait(lambda: worker.distinct() >= all_texts, 120), (
            f"{len(worker.distinct())} of {N} delivered; missing "
            f"{sorted(all_texts - worker.distinct())[:10]}")
        assert worker.resumed_at is not None and len(worker.seen) > worker.resumed_at
        assert session._thread is not None and session._thread.is_alive()

        seen: set[str] = set()
        unmarked = []
        for text, redelivered, count in worker.seen:
            if text in seen and not (redelivered and count > 1):
                unmarked.append((text, redelivered, count))
            seen.add(text)
        assert unmarked == [], f"duplicates not marked redelivered: {unmarked[:10]}"
    finally:
        conn.close()
