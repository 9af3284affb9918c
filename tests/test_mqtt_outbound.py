"""The asynchronous-send window of mqtt:// (transports/mqtt/outbound.py), driven by an
in-memory stand-in for paho: which PUBLISHes leave, when a sender blocks and resumes, and
in which order completions are reported.

The window bounds outstanding sends to ``send_window``; a sender that finds it full
waits until PUBACKs have freed half of it (one wake-up per half window, not one per
PUBACK), and completions come in send order whatever order the PUBACKs arrive in.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest

from jmspy import Topic
from jmspy.message import TextMessage
from jmspy.transports.mqtt.outbound import Outbound


@dataclass
class _Info:
    mid: int
    rc: int = 0


class _Paho:
    """Records PUBLISHes; packet ids count from 1 like paho's."""

    def __init__(self) -> None:
        self.mids: list[int] = []

    def publish(self, topic: str, payload: bytes, qos: int, retain: bool,
                properties: Any) -> _Info:
        self.mids.append(len(self.mids) + 1)
        return _Info(self.mids[-1])


class _Host:
    version = "3.1.1"
    max_packet_size = None  # a 3.1.1 broker says none
    reconnecting = False  # a test sets it: the connection dropped, a reconnect under way

    def __init__(self) -> None:
        self.paho = _Paho()
        self.readers_asked = 0

    def client(self, wait: bool = True) -> _Paho:
        return self.paho

    def need_reader(self) -> None:  # an event loop holding the reading gives it back
        self.readers_asked += 1

    def describe(self) -> str:
        return "MQTT 3.1.1 broker at in-memory"


def _message(n: int) -> TextMessage:
    message = TextMessage(f"m{n}")
    message.destination = Topic("t")
    message.message_id = f"ID:{n}"
    message.delivery_mode = 2  # PERSISTENT: QoS 1, completed by its PUBACK
    return message


def _sender(outbound: Outbound, first: int, count: int, done: list[Any]) -> threading.Thread:
    def run() -> None:
        for n in range(first, first + count):
            outbound.publish_async(_message(n), lambda error, n=n: done.append((n, error)))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _wait_blocked(outbound: Outbound, senders: int) -> None:
    for _ in range(100_000):
        if outbound.blocked_senders == senders:
            return
        threading.Event().wait(0.001)  # the sender thread reaching the full window
    pytest.fail(f"{senders} sender(s) never blocked on the full window")


def _puback(outbound: Outbound, mid: int) -> None:
    outbound.on_publish(None, None, mid, None, None)


@pytest.mark.parametrize("window", [1, 2, 10, 100])
def test_a_blocked_sender_resumes_once_half_the_window_is_free(window: int) -> None:
    host = _Host()
    outbound = Outbound(host, window)
    done: list[Any] = []
    sender = _sender(outbound, 1, window + 1, done)
    _wait_blocked(outbound, 1)
    assert host.paho.mids == list(range(1, window + 1))  # the window full, no more
    assert host.readers_asked >= 1  # while it blocks: whoever holds the reading reads
    resume = max(1, window // 2)
    for mid in range(1, resume):  # fewer PUBACKs than half the window: still blocked
        _puback(outbound, mid)
        assert outbound.blocked_senders == 1
        assert outbound.free_places == mid
    _puback(outbound, resume)
    sender.join(10)
    assert not sender.is_alive()
    assert len(host.paho.mids) == window + 1
    assert outbound.free_places == resume - 1
    assert [n for n, _ in done] == list(range(1, resume + 1))


def test_completions_come_in_send_order_whatever_the_puback_order() -> None:
    host = _Host()
    outbound = Outbound(host, 10)
    done: list[Any] = []
    _sender(outbound, 1, 5, done).join(10)
    for mid in (3, 5, 1):
        _puback(outbound, mid)
    assert [n for n, _ in done] == [1]  # 2 is still outstanding: 3 and 5 wait for it
    _puback(outbound, 2)
    assert [n for n, _ in done] == [1, 2, 3]
    _puback(outbound, 4)
    assert done == [(n, None) for n in range(1, 6)]
    assert outbound.free_places == 10


def test_a_dropped_connection_fails_every_outstanding_send_and_frees_a_blocked_sender() -> None:
    host = _Host()
    outbound = Outbound(host, 4)
    done: list[Any] = []
    sender = _sender(outbound, 1, 5, done)
    _wait_blocked(outbound, 1)
    outbound.fail_all("the connection dropped")
    sender.join(10)
    assert not sender.is_alive()
    assert [n for n, _ in done] == [1, 2, 3, 4]
    assert all("no PUBACK for ID:" in str(error) for _, error in done)
    assert len(host.paho.mids) == 5  # the blocked send went out once the window freed


# -- a sender on an event loop's thread parks instead of blocking ------------------------
def _on_loop(run: Any) -> Any:
    """Run ``run()`` inside a coroutine: on a thread running an event loop."""
    import asyncio

    async def main() -> Any:
        return run()

    return asyncio.run(main())


@pytest.mark.parametrize("window", [1, 3, 100])
def test_a_sender_on_an_event_loop_parks_when_the_window_is_full(window: int) -> None:
    host = _Host()
    outbound = Outbound(host, window)
    done: list[Any] = []
    count = 3 * window + 2

    def send_all() -> None:  # a gather of awaited sends: none of them may wait here
        for n in range(1, count + 1):
            outbound.publish_async(_message(n), lambda error, n=n: done.append((n, error)))

    _on_loop(send_all)  # returns: the loop was never blocked
    assert host.paho.mids == list(range(1, window + 1))  # the window full, no more
    assert outbound.parked_sends == count - window
    assert outbound.blocked_senders == 0 and host.readers_asked == 0
    for mid in range(1, count + 1):  # each PUBACK frees a place: the next parked leaves
        _puback(outbound, mid)
        assert len(host.paho.mids) == min(count, mid + window)
        assert outbound.parked_sends == max(0, count - window - mid)
    assert done == [(n, None) for n in range(1, count + 1)]  # in send order
    assert outbound.free_places == window


def test_a_send_behind_parked_sends_parks_even_when_a_place_is_free() -> None:
    host = _Host()
    outbound = Outbound(host, 2)
    done: list[Any] = []
    _on_loop(lambda: [outbound.publish_async(
        _message(n), lambda error, n=n: done.append((n, error))) for n in (1, 2, 3, 4)])
    assert outbound.parked_sends == 2
    # a thread not on a loop, with parked sends ahead of it: it goes behind them
    _sender(outbound, 5, 1, done).join(10)
    assert outbound.parked_sends == 3 and host.paho.mids == [1, 2]
    for mid in range(1, 6):
        _puback(outbound, mid)
    assert [n for n, _ in done] == [1, 2, 3, 4, 5]
    assert host.paho.mids == [1, 2, 3, 4, 5]


def test_a_close_fails_parked_sends_after_the_written_ones_and_writes_none_of_them() -> None:
    host = _Host()
    outbound = Outbound(host, 2)
    done: list[Any] = []
    _on_loop(lambda: [outbound.publish_async(
        _message(n), lambda error, n=n: done.append((n, error))) for n in range(1, 6)])
    outbound.fail_all("the connection was closed first")
    assert [n for n, _ in done] == [1, 2, 3, 4, 5]
    assert all("no PUBACK for ID:" in str(error) for _, error in done[:2])
    assert all("was not sent: the connection was closed first" in str(error)
               for _, error in done[2:])
    assert host.paho.mids == [1, 2] and outbound.parked_sends == 0
    _puback(outbound, 1)  # a late PUBACK writes nothing more
    assert host.paho.mids == [1, 2]


def test_parked_sends_outlive_a_drop_and_the_reconnect_writes_them_in_order() -> None:
    host = _Host()
    outbound = Outbound(host, 2)
    done: list[Any] = []

    def send(numbers: range) -> None:
        _on_loop(lambda: [outbound.publish_async(
            _message(n), lambda error, n=n: done.append((n, error))) for n in numbers])

    send(range(1, 5))  # 1, 2 written; 3, 4 parked for the window
    outbound.fail_all("the connection dropped", parked=False)
    host.reconnecting = True
    assert [n for n, _ in done] == [1, 2]  # the broker may or may not have them
    send(range(5, 7))  # on the loop while it reconnects: parked, not waited for
    assert outbound.parked_sends == 4 and host.paho.mids == [1, 2]
    host.reconnecting = False
    outbound.resume()  # the reconnect thread, once the new client is up
    assert host.paho.mids == [1, 2, 3, 4]  # the window's two places
    for mid in (3, 4, 5, 6):
        _puback(outbound, mid)
    assert [n for n, _ in done] == [1, 2, 3, 4, 5, 6]
    assert all(error is None for _, error in done[2:])
    assert host.paho.mids == [1, 2, 3, 4, 5, 6] and outbound.parked_sends == 0


def test_a_send_on_a_loop_while_reconnecting_parks_even_with_room() -> None:
    host = _Host()
    host.reconnecting = True
    outbound = Outbound(host, 10)
    done: list[Any] = []
    _on_loop(lambda: outbound.publish_async(_message(1), lambda e: done.append(e)))
    assert host.paho.mids == [] and outbound.parked_sends == 1 and done == []
    outbound.fail_all("lost the MQTT connection for good")  # a reconnect given up
    assert "was not sent: lost the MQTT connection for good" in str(done[0])


def test_a_parked_send_that_fails_to_publish_fails_alone_and_the_next_goes_out() -> None:
    host = _Host()
    outbound = Outbound(host, 1)
    done: list[Any] = []
    big = _message(2)
    host.max_packet_size = 200
    big.text = "x" * 500  # over the broker's Maximum Packet Size: refused before writing
    messages = [_message(1), big, _message(3)]
    _on_loop(lambda: [outbound.publish_async(
        m, lambda error, n=n: done.append((n, error))) for n, m in enumerate(messages, 1)])
    _puback(outbound, 1)  # frees the place: 2 is refused, 3 goes out
    assert host.paho.mids == [1, 2]
    _puback(outbound, 2)
    assert [n for n, _ in done] == [1, 2, 3]
    assert done[0][1] is None and done[2][1] is None
    assert "Packet too large" in str(done[1][1])
