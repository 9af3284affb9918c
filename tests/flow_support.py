"""What the producer-flow-control tests share, over ``vm://`` and over STOMP: waiting for
another thread to get somewhere, and the one-connection loop (produce and consume on the
same connection) that must keep moving through a full broker. The tests keep their own
assertions; these only drive."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jmspy import Connection, DeliveryMode, MessageProducer, Queue, Session


def until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``check`` every 10 ms (the producer, the consumer or the broker runs on
    another thread or process) for up to ``timeout`` s; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@dataclass
class Loop:
    """The outcome of :func:`loop_one_connection`: what arrived (the ``i`` of each
    ``"i:body"`` text, in arrival order), whether all ``n`` did in time, and the producing
    session and producer, for sending more."""

    got: list[int]
    arrived: bool
    session: Session
    producer: MessageProducer


def loop_one_connection(conn: Connection, n: int, body: str,
                        producer_stopped: Callable[[], bool], timeout: float) -> Loop:
    """Send ``n`` NON_PERSISTENT ``"i:body"`` texts to queue ``loop`` from one session of
    ``conn`` while a listener on another session of ``conn`` consumes them. The listener
    holds the first message until ``producer_stopped()`` (the memory limit has stopped the
    producer), so the loop only moves on if flow control stops that producer and not the
    whole connection. Returns once all ``n`` arrived or ``timeout`` s passed."""
    got: list[int] = []
    done = threading.Event()
    producing = conn.create_session()
    consuming = conn.create_session()

    def on_message(m: Any) -> None:
        if not got:  # hold the first message until the producer is stopped: the limit is
            until(producer_stopped, "the producer to be stopped")  # reached
        got.append(int(m.text.split(":")[0]))
        if len(got) == n:
            done.set()

    consuming.create_consumer(Queue("loop")).set_message_listener(on_message)
    conn.start()
    producer = producing.create_producer(Queue("loop"))
    for i in range(n):
        producer.send(producing.create_text_message(f"{i}:{body}"),
                      delivery_mode=DeliveryMode.NON_PERSISTENT)
    return Loop(got, done.wait(timeout), producing, producer)
