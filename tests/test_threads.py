"""Listener threading: user code never runs on a transport or broker thread, failures
redeliver, and close() is safe from anywhere."""

from __future__ import annotations

import threading
import time

from polling import wait_until

from jmspy import JMSException, Queue, Session


def test_listener_runs_on_the_session_thread_not_the_senders(vm_factory):
    queue = Queue("threads.where")
    seen: list[str] = []
    done = threading.Event()

    def listener(msg):
        seen.append(threading.current_thread().name)
        done.set()

    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        session.create_consumer(queue).set_message_listener(listener)
        conn.start()
        session.create_producer(queue).send(session.create_text_message("x"))
        assert done.wait(2.0)
    assert seen and seen[0].startswith("jmspy-session-")
    assert seen[0] != threading.current_thread().name


def test_a_slow_listener_does_not_hold_up_another_sessions_consumer(vm_factory):
    slow_q, fast_q = Queue("threads.slow"), Queue("threads.fast")
    release = threading.Event()
    started = threading.Event()

    def slow(msg):
        started.set()
        release.wait(5.0)

    with vm_factory.create_connection() as conn:
        slow_session = conn.create_session()
        slow_session.create_consumer(slow_q).set_message_listener(slow)
        fast_session = conn.create_session()
        fast = fast_session.create_consumer(fast_q)
        conn.start()
        producer = fast_session.create_producer(None)
        producer.send(fast_session.create_text_message("block"), slow_q)
        assert started.wait(2.0)
        producer.send(fast_session.create_text_message("go"), fast_q)
        # received while the slow listener still holds its session's thread
        assert fast.receive(2.0).text == "go"
        assert not release.is_set()
        release.set()


def test_listener_exception_in_auto_mode_redelivers_and_tells_the_exception_listener(vm_factory):
    queue = Queue("threads.fail")
    errors: list[JMSException] = []
    attempts: list[tuple[bool, int]] = []
    done = threading.Event()

    def listener(msg):
        attempts.append((msg.redelivered, msg.delivery_count))
        if len(attempts) < 3:
            raise ValueError("boom")
        done.set()

    with vm_factory.create_connection() as conn:
        conn.set_exception_listener(errors.append)
        session = conn.create_session()
        session.create_consumer(queue).set_message_listener(listener)
        conn.start()
        session.create_producer(queue).send(session.create_text_message("x"))
        assert done.wait(2.0)
        wait_until(lambda: len(errors) >= 2, 2)
        assert conn.destination_stats(queue)["messageCount"] == 0
    assert attempts == [(False, 1), (True, 2), (True, 3)]
    assert len(errors) == 2
    assert "raised ValueError: boom" in str(errors[0])
    assert isinstance(errors[0].__cause__, ValueError)


def test_close_from_inside_on_message_finishes_and_acknowledges(vm_factory):
    queue = Queue("threads.close")
    closed = threading.Event()
    with vm_factory.create_connection() as setup:
        s = setup.create_session()
        p = s.create_producer(queue)
        p.send(s.create_text_message("a"))
        p.send(s.create_text_message("b"))
    conn = vm_factory.create_connection()
    session = conn.create_session()
    consumer = session.create_consumer(queue)

    def listener(msg):
        conn.close()
        closed.set()

    consumer.set_message_listener(listener)
    conn.start()
    assert closed.wait(2.0)
    wait_until(lambda: conn.closed, 2)
    assert conn.closed
    with vm_factory.create_connection() as check:
        stats = check.destination_stats(queue)
        # "a" was acknowledged after the listener returned; "b" went back to the queue.
        assert (stats["messageCount"], stats["deliveringCount"]) == (1, 0)


def test_consumer_close_from_its_own_listener_stops_delivery(vm_factory):
    queue = Queue("threads.consumer.close")
    got: list[str] = []
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        consumer = session.create_consumer(queue)

        def listener(msg):
            got.append(msg.text)
            consumer.close()

        consumer.set_message_listener(listener)
        producer = session.create_producer(queue)
        for text in "abc":
            producer.send(session.create_text_message(text))
        conn.start()
        wait_until(lambda: consumer.closed, 2)
        assert consumer.closed and got == ["a"]
        assert conn.destination_stats(queue)["messageCount"] == 2


def test_close_from_another_thread_waits_for_the_running_listener(vm_factory):
    queue = Queue("threads.close.other")
    in_listener = threading.Event()
    finished: list[bool] = []

    def listener(msg):
        in_listener.set()
        time.sleep(0.2)
        finished.append(True)

    conn = vm_factory.create_connection()
    session = conn.create_session()
    session.create_consumer(queue).set_message_listener(listener)
    conn.start()
    session.create_producer(queue).send(session.create_text_message("x"))
    assert in_listener.wait(2.0)
    conn.close()
    assert finished == [True]


def test_stop_pauses_listeners_and_start_resumes(vm_factory):
    queue = Queue("threads.stop")
    got: list[str] = []
    with vm_factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        session.create_consumer(queue).set_message_listener(lambda m: got.append(m.text))
        producer = session.create_producer(queue)
        producer.send(session.create_text_message("a"))
        time.sleep(0.1)
        assert got == []  # not started
        conn.start()
        deadline = time.monotonic() + 2
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        conn.stop()
        producer.send(session.create_text_message("b"))
        time.sleep(0.1)
        assert got == ["a"]
        conn.start()
        wait_until(lambda: len(got) >= 2, 2)
        assert got == ["a", "b"]
