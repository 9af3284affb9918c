"""stomp://: an ACK written into a socket the peer reset is a connection loss, in every
acknowledgement mode, and the listener's session goes on after CONNECTION_RESUMED.

The broker is the bundled one, in-process on a loopback port; the fault is the first ACK
write of the connection raising ConnectionResetError (what writing into a reset TCP
connection raises), as a broker killed mid-stream makes it. Before the fix the session's
dispatcher thread died there and the listener heard nothing after CONNECTION_RESUMED.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from recording import Heard

from jmspy import ConnectionFactory, JMSException, Session
from jmspy.transports.stomp import wire

MODES = {"auto": (False, Session.AUTO_ACKNOWLEDGE),
         "client": (False, Session.CLIENT_ACKNOWLEDGE),
         "transacted": (True, Session.AUTO_ACKNOWLEDGE)}


class Listener(Heard):
    """Acknowledges as its mode says; records (text, redelivered) of every delivery."""

    def __init__(self, session: Any, mode: str) -> None:
        super().__init__()
        self.session, self.mode = session, mode

    def __call__(self, message: Any) -> None:
        super().__call__(message)
        try:
            if self.mode == "client":
                message.acknowledge()
            elif self.mode == "transacted":
                self.session.commit()
        except JMSException:
            pass  # the connection dropped under it: the broker redelivers the message


@pytest.mark.parametrize("mode", list(MODES))
def test_an_ack_into_a_reset_socket_reconnects_and_the_listener_resumes(
        server: Any, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real_ack = wire.FrameWriter.ack
    failed = threading.Event()

    def reset_once(self: Any, acks: list[tuple[str, str]], tx: str | None) -> None:
        if not failed.is_set():
            failed.set()
            raise ConnectionResetError(104, "Connection reset by peer")
        real_ack(self, acks, tx)

    monkeypatch.setattr(wire.FrameWriter, "ack", reset_once)
    codes: list[str] = []
    resumed = threading.Event()

    def on_exception(error: JMSException) -> None:
        codes.append(error.error_code)
        if error.error_code == "CONNECTION_RESUMED":
            resumed.set()

    url = f"stomp://{server.host}:{server.port}?heartbeat=0"
    conn = ConnectionFactory(url, imqReconnectEnabled=True, imqReconnectInterval=1,
                             imqReconnectAttempts=50, imqConsumerFlowLimit=5
                             ).create_connection()
    try:
        conn.set_exception_listener(on_exception)
        transacted, ack_mode = MODES[mode]
        session = conn.create_session(transacted, ack_mode)
        queue = session.create_queue(f"io.reset.{mode}")
        listener = Listener(session, mode)
        session.create_consumer(queue).set_message_listener(listener)
        sender = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        producer = sender.create_producer(queue)
        for i in range(8):
            producer.send(sender.create_text_message(f"m{i}"))
        conn.start()
        assert resumed.wait(20), codes
        listener.wait_for({f"m{i}" for i in range(8)})
        producer.send(sender.create_text_message("after"))
        listener.wait_for({"after"})

        assert failed.is_set()
        assert session._thread is not None and session._thread.is_alive()
        assert codes[:2] == ["CONNECTION_INTERRUPTED", "CONNECTION_RESUMED"], codes
        seen: set[str] = set()
        for text, redelivered in listener.got:
            assert text not in seen or redelivered, (text, listener.got)
            seen.add(text)
        assert any(redelivered for _, redelivered in listener.got)  # the unacked came back
    finally:
        conn.close()
