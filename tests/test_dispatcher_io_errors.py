"""No exception kills a session's dispatcher thread: an error from a transport's I/O path
(an OSError of any kind, a protocol library's own exception) is a connection loss.

The transport here is the in-process one with a fault injected into one call (``ack``,
``try_ack`` or ``grant_credit``) that raises what a socket or stomp.py / paho would, as
a transport that forgot to translate it would let it through. Its ``io_failed`` -- the
hook the core calls with such an error -- drops its link the way a network transport's
broken socket does, so the real reconnect machinery (jmspy/reconnect.py) runs. What is
proven: the dispatcher lives, ``io_failed`` hears the error, the exception listener hears
CONNECTION_INTERRUPTED then CONNECTION_RESUMED, every message is delivered, the only
duplicates are marked redelivered, and the listener goes on with new messages.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import SplitResult

import pytest
from recording import Events, Heard

from jmspy import ConnectionFactory, Session
from jmspy.transport import register_transport
from jmspy.transports import vm


class _LibraryError(Exception):
    """What stomp.py (``stomp.exception.ConnectionClosedException``) or paho raise: not an
    OSError, not a JMSException."""


class FlakyVm(vm.VmTransport):
    """vm:// whose next call named in ``faults`` raises that exception instead."""

    faults: dict[str, BaseException] = {}
    instances: list[FlakyVm] = []

    def __init__(self, url: SplitResult, properties: Mapping[str, Any]) -> None:
        super().__init__(url, properties)
        self.io_errors: list[BaseException] = []
        FlakyVm.instances.append(self)

    def _fault(self, call: str) -> None:
        error = FlakyVm.faults.pop(call, None)
        if error is not None:
            raise error

    def ack(self, delivery_tags: list[int], tx: str | None = None) -> None:
        self._fault("ack")
        super().ack(delivery_tags, tx)

    def try_ack(self, delivery_tags: list[int]) -> bool:
        self._fault("ack")
        return super().try_ack(delivery_tags)

    def grant_credit(self, consumer_id: int, credits: int) -> None:
        self._fault("grant_credit")
        super().grant_credit(consumer_id, credits)

    def io_failed(self, error: BaseException) -> None:
        """Drop the link as a broken socket would: the broker takes back what was not
        acknowledged (counted as delivered once) and the transport reconnects."""
        self.io_errors.append(error)
        with self.host.lock:
            self.host.transports.discard(self)
            self.server_closed()
        threading.Thread(target=self.broker_stopped, name="flaky-drop").start()


@pytest.fixture
def flaky() -> Iterator[str]:
    register_transport("flakyvm", FlakyVm)
    name = f"flaky-{uuid.uuid4().hex[:8]}"
    vm.start_broker(name)
    FlakyVm.faults, FlakyVm.instances = {}, []
    try:
        yield f"flakyvm://{name}"
    finally:
        vm.stop_broker(name)


FAULTS = [ConnectionResetError(104, "Connection reset by peer"),
          BrokenPipeError(32, "Broken pipe"), OSError(9, "Bad file descriptor"),
          _LibraryError("connection closed")]


@pytest.mark.parametrize("call", ["ack", "grant_credit"])
@pytest.mark.parametrize("fault", FAULTS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("mode", [Session.AUTO_ACKNOWLEDGE, Session.DUPS_OK_ACKNOWLEDGE])
def test_an_io_error_under_the_dispatcher_is_a_connection_loss_and_the_listener_resumes(
        flaky: str, call: str, fault: BaseException, mode: int) -> None:
    events, heard = Events(), Heard()
    factory = ConnectionFactory(flaky, imqReconnectEnabled=True, imqReconnectInterval=1,
                                imqReconnectAttempts=50, imqConsumerFlowLimit=4)
    conn = factory.create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, mode)
        queue = session.create_queue("io.errors")
        session.create_consumer(queue).set_message_listener(heard)
        producer = session.create_producer(queue)
        FlakyVm.faults[call] = fault
        for i in range(10):  # a window of 4: credit is granted again while they flow
            producer.send(session.create_text_message(f"m{i}"))
        conn.start()
        events.wait_for("CONNECTION_RESUMED")
        heard.wait_for({f"m{i}" for i in range(10)})
        producer.send(session.create_text_message("after"))  # the listener goes on
        heard.wait_for({"after"})

        transport = FlakyVm.instances[0]
        assert transport.io_errors == [fault]
        assert session._thread is not None and session._thread.is_alive()
        assert events.codes[:2] == ["CONNECTION_INTERRUPTED", "CONNECTION_RESUMED"]
        assert "IO_FAILED" not in events.codes
        seen: set[str] = set()
        for text, redelivered in heard.got:
            assert text not in seen or redelivered, (text, heard.got)  # dup => marked
            seen.add(text)
    finally:
        conn.close()


class Unhooked(vm.VmTransport):
    """A transport without ``io_failed`` whose ack raises once."""

    armed = True

    def try_ack(self, delivery_tags: list[int]) -> bool:
        if Unhooked.armed:
            Unhooked.armed = False
            raise ConnectionResetError(104, "Connection reset by peer")
        return super().try_ack(delivery_tags)

    ack = vm.VmTransport.ack


def test_a_transport_without_io_failed_gets_the_error_reported_and_the_dispatcher_lives(
        ) -> None:
    register_transport("unhookedvm", Unhooked)
    name = f"unhooked-{uuid.uuid4().hex[:8]}"
    vm.start_broker(name)
    Unhooked.armed = True
    events, heard = Events(), Heard()
    conn = ConnectionFactory(f"unhookedvm://{name}").create_connection()
    try:
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        queue = session.create_queue("io.unhooked")
        session.create_consumer(queue).set_message_listener(heard)
        producer = session.create_producer(queue)
        conn.start()
        producer.send(session.create_text_message("first"))
        events.wait_for("IO_FAILED")
        producer.send(session.create_text_message("second"))
        heard.wait_for({"first", "second"})
        assert session._thread is not None and session._thread.is_alive()
    finally:
        conn.close()
        vm.stop_broker(name)
