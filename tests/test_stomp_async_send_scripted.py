"""stomp://'s asynchronous send path (``send_async``) against scripted brokers: what each
SEND gets back decides its outcome, reported in send order, with the same errors as the
blocking send; an async connection reads the answers on its own event loop.

Each server answers CONNECT and then SENDs as its plan says, per connection accepted:
"ok" (a RECEIPT), "refuse" (an ERROR naming the receipt, the connection kept, as
ActiveMQ does after refusing a SEND), "drop" (the socket closed, no answer), "hold"
(no answer until the test releases the held ones, then RECEIPTs in reverse order)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from aio_support import send_outcomes
from scripted_stomp import LoopbackServer, read_client_frames

from jmspy import ConnectionFactory, DeliveryMode, JMSException, Message
from jmspy._speedups import load
from jmspy.aio import AsyncConnectionFactory
from jmspy.stomp_frames import Frame
from jmspy.transports.stomp import stomppy_private

_codec = load("stomp_codec")


def _frame(command: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
    return bytes(_codec.encode_frame(Frame(command, headers, body), "1.2"))


class SendScript(LoopbackServer):
    """``plans[i]``: the answers to the i-th connection's SENDs, in order (the last one
    repeats)."""

    def __init__(self, *plans: list[str]) -> None:
        self.plans = list(plans)
        self.sends: list[list[bytes]] = [[] for _ in plans]  # bodies per connection
        self.held: list[tuple[socket.socket, str]] = []
        super().__init__(limit=len(plans))

    def accepted(self, index: int, sock: socket.socket) -> None:
        threading.Thread(target=self._serve_one, args=(index, sock), daemon=True).start()

    def release_held(self) -> None:
        for sock, receipt in reversed(self.held):
            sock.sendall(_frame("RECEIPT", [("receipt-id", receipt)]))

    def _serve_one(self, index: int, sock: socket.socket) -> None:
        plan = self.plans[index]

        def on_frame(frame: Frame) -> bool:
            if frame.command in ("CONNECT", "STOMP"):
                sock.sendall(_frame("CONNECTED", [("version", "1.2"), ("heart-beat", "0,0")]))
                return False
            receipt = frame.header("receipt") or ""
            if frame.command != "SEND":
                if receipt:
                    sock.sendall(_frame("RECEIPT", [("receipt-id", receipt)]))
                return frame.command == "DISCONNECT"
            n = len(self.sends[index])
            self.sends[index].append(frame.body)
            answer = plan[min(n, len(plan) - 1)]
            if answer == "drop":
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()
                return True
            if answer == "hold":
                self.held.append((sock, receipt))
            elif answer == "refuse":
                sock.sendall(_frame("ERROR", [("receipt-id", receipt),
                                              ("message", "not authorized to write")]))
            elif receipt:
                sock.sendall(_frame("RECEIPT", [("receipt-id", receipt)]))
            return False

        read_client_frames(sock, on_frame)


@pytest.fixture
def scripts() -> Iterator[list[SendScript]]:
    made: list[SendScript] = []
    yield made
    for s in made:
        s.close()


def _until(check: Callable[[], bool], guard: float = 30.0) -> None:
    deadline = time.monotonic() + guard
    while not check():
        assert time.monotonic() < deadline, "the scripted broker never got there"
        time.sleep(0.01)  # the server's thread reads what the client wrote


def _script(made: list[SendScript], *plans: list[str]) -> SendScript:
    s = SendScript(*plans)
    made.append(s)
    return s


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_awaited_sends_raise_their_own_refusal_and_drop_read_on_the_loop(
        scripts: list[SendScript], loop: str) -> None:
    factory_of_loop = (pytest.importorskip("uvloop").new_event_loop if loop == "uvloop"
                       else None)
    server = _script(scripts, ["ok", "refuse", "ok", "drop"])

    async def main() -> tuple[list[str | None], int]:
        factory = AsyncConnectionFactory(f"stomp://127.0.0.1:{server.port}",
                                         imqReconnectEnabled=False)
        conn = await factory.create_connection()
        try:
            session = await conn.create_session()
            producer = await session.create_producer(session.create_queue("scripted.aio"))
            return await send_outcomes(session, producer, 4), conn._reading.reads
        finally:
            await conn.close()

    with asyncio.Runner(loop_factory=factory_of_loop) as runner:
        outcomes, loop_reads = runner.run(main())
    assert outcomes[0] is None and outcomes[2] is None
    assert outcomes[1] is not None and outcomes[1].startswith("JMSSecurityException")
    assert "refused the persistent message" in outcomes[1]
    assert outcomes[3] is not None and "dropped before it confirmed" in outcomes[3]
    if stomppy_private.enabled():  # jmspy's frame reader: it lends the loop the reading
        assert loop_reads > 0  # the loop read the broker's answers itself
    else:  # stomp.py's own reading (the public path) lends nothing
        assert loop_reads == 0


def test_completions_come_in_send_order_when_the_broker_answers_in_reverse(
        scripts: list[SendScript]) -> None:
    server = _script(scripts, ["hold"])
    done: list[tuple[str, Exception | None]] = []
    all_done = threading.Event()

    class Listener:
        def on_completion(self, message: Message) -> None:
            done.append((message.text, None))  # type: ignore[attr-defined]
            if len(done) == 5:
                all_done.set()

        def on_exception(self, message: Message, exception: Exception) -> None:
            done.append((message.text, exception))  # type: ignore[attr-defined]

    with ConnectionFactory(f"stomp://127.0.0.1:{server.port}",
                           imqReconnectEnabled=False).create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(session.create_queue("scripted.order"))
        for i in range(5):  # none waits for its receipt
            producer.send(session.create_text_message(f"m{i}"), completion_listener=Listener())
        _until(lambda: len(server.held) == 5)  # all written before any was answered
        assert server.sends[0] == [f"m{i}".encode() for i in range(5)]
        assert done == []
        server.release_held()
        assert all_done.wait(30)
    assert done == [(f"m{i}", None) for i in range(5)]


def test_a_send_made_while_reconnecting_is_written_on_the_new_connection(
        scripts: list[SendScript]) -> None:
    server = _script(scripts, ["ok", "drop"], ["ok"])

    async def main() -> list[str | None]:
        factory = AsyncConnectionFactory(
            f"stomp://127.0.0.1:{server.port}", imqReconnectEnabled=True,
            imqReconnectInterval=100, imqReconnectAttempts=50)
        async with factory.create_connection() as conn:
            session = await conn.create_session()
            producer = await session.create_producer(session.create_queue("scripted.move"))
            outcomes: list[str | None] = []
            for i in range(3):
                message = session.create_text_message(f"m{i}")
                try:
                    await producer.send(message, delivery_mode=DeliveryMode.PERSISTENT)
                    outcomes.append(None)
                except JMSException as exc:
                    outcomes.append(exc.error_code)
            return outcomes

    outcomes = asyncio.run(main())
    assert outcomes == [None, "CONNECTION_INTERRUPTED", None]
    assert server.sends == [[b"m0", b"m1"], [b"m2"]]
