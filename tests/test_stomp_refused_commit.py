"""A commit the broker refuses with an ERROR, closing the connection after it (as STOMP
says a broker does), leaves the session's next send failing with the broker's reason:
never a send that returns quietly into a transaction whose BEGIN never went out.

The order that lost the reason under load: stomp.py's receiver thread has read the ERROR
and the end of the stream and closed the socket, but has not yet reported the drop, when
the session (on its way out of the failed commit) writes the BEGIN of its next
transaction and the application sends in it. The test holds that report back until the
send has returned or raised, and also runs the order where the report comes at once."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from scripted_stomp import LoopbackServer, read_client_frames

from jmspy import ConnectionFactory, JMSException, TransactionRolledBackException
from jmspy._speedups import load
from jmspy.stomp_frames import Frame
from jmspy.transports.stomp.transport import StompTransport

_codec = load("stomp_codec")
REASON = "frame body too large: over this broker's limit of 65536 bytes"


def _frame(command: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
    return bytes(_codec.encode_frame(Frame(command, headers, body), "1.2"))


class RefusesCommits(LoopbackServer):
    """Answers CONNECT; takes BEGIN and SEND silently; answers a COMMIT with an ERROR
    naming no receipt, then shuts its side (FIN) and reads on until the client closes."""

    def accepted(self, index: int, sock: socket.socket) -> None:
        threading.Thread(target=self._serve_one, args=(sock,), daemon=True).start()

    def _serve_one(self, sock: socket.socket) -> None:
        def on_frame(frame: Frame) -> bool:
            if frame.command in ("CONNECT", "STOMP"):
                sock.sendall(_frame("CONNECTED", [("version", "1.2"), ("heart-beat", "0,0")]))
            elif frame.command == "COMMIT":
                sock.sendall(_frame("ERROR", [("message", REASON)], b"refused"))
                sock.shutdown(socket.SHUT_WR)
            elif frame.command == "DISCONNECT" and frame.header("receipt"):
                sock.sendall(_frame("RECEIPT", [("receipt-id", frame.header("receipt") or "")]))
            return False

        read_client_frames(sock, on_frame)


@pytest.fixture
def broker() -> Iterator[RefusesCommits]:
    server = RefusesCommits()
    yield server
    server.close()


@pytest.mark.parametrize("send", ["blocking", "completion-listener"])
@pytest.mark.parametrize("report", ["held-back", "at-once"])
def test_the_send_after_a_refused_commit_fails_with_the_brokers_reason(
        broker: RefusesCommits, report: str, send: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """(``completion-listener``: the JMS 2.0 asynchronous send, whose failure may come
    from the call or through the listener.)"""
    released = threading.Event()
    if report == "held-back":
        reported = StompTransport.on_disconnected

        def late(self: StompTransport, conn: Any) -> None:
            released.wait(30)  # the test's send below has returned or raised
            reported(self, conn)

        monkeypatch.setattr(StompTransport, "on_disconnected", late)
    else:
        released.set()
    conn = ConnectionFactory(f"stomp://127.0.0.1:{broker.port}").create_connection()
    try:
        session = conn.create_session(transacted=True)
        producer = session.create_producer(session.create_queue("orders"))
        producer.send(session.create_text_message("in the refused transaction"))
        with pytest.raises(TransactionRolledBackException, match=REASON):
            session.commit()
        after = session.create_text_message("after")
        if send == "blocking":
            with pytest.raises(JMSException, match=REASON) as later:
                producer.send(after)
            failure: BaseException = later.value
        else:
            heard: list[BaseException | None] = []
            done = threading.Event()

            class Listener:
                def on_completion(self, message: Any) -> None:
                    heard.append(None)
                    done.set()

                def on_exception(self, message: Any, exc: BaseException) -> None:
                    heard.append(exc)
                    done.set()

            try:
                producer.send(after, completion_listener=Listener())
            except JMSException as exc:
                failure = exc
            else:
                assert done.wait(30)  # the listener's one call
                assert heard[0] is not None, "the send completed"
                failure = heard[0]
        assert REASON in str(failure) and str(failure).count(REASON) == 1
    finally:
        released.set()
        conn.close()
