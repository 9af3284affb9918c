"""When the asyncio host writes what one client's frames produced for other clients, and
when its loop polls instead of sleeping after a read (jmspy/idle_spin.py).

These drive the host's connection objects with recording transports on a real event
loop, without sockets: what was written, in which order, and whether it took a loop turn.
The polling window is timed by .loop_polling's clock, replaced here by a fake one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from stomp_support import RecordingTransport

from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.stomp import loop_polling
from jmspy.broker_ref.protocols.stomp.server import StompServer, _Connection
from jmspy.idle_spin import DEFAULT_IDLE_SPIN_US, GAVE_WAY_S


def _frame(command: str, **headers: str) -> bytes:
    lines = "".join(f"{k.replace('_', '-')}:{v}\n" for k, v in headers.items())
    return f"{command}\n{lines}\n".encode() + b"\0"


def _client(server: StompServer, name: str, log: list[tuple[str, bytes]]) -> _Connection:
    conn = _Connection(server)
    conn.connection_made(RecordingTransport(name, log))
    conn.data_received(_frame("CONNECT", accept_version="1.2", host="/", heart_beat="0,0"))
    return conn


def _commands(log: list[tuple[str, bytes]]) -> list[tuple[str, str]]:
    return [(name, data.split(b"\n", 1)[0].decode()) for name, data in log]


async def _one_send(
    broker: Broker, probe: Callable[[], object] = lambda: None, ack: str = "auto", **send: str,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], object]:
    """A consumer subscribed (``ack``) to ``/queue/q`` and a producer: what had been
    written when the producer's SEND (``send``: more headers; a receipt) returned from
    data_received, ``probe()`` at that moment, and what had been written one loop turn
    later."""
    server = StompServer(broker, heartbeat_ms=0)
    log: list[tuple[str, bytes]] = []
    consumer = _client(server, "consumer", log)
    consumer.data_received(_frame("SUBSCRIBE", destination="/queue/q", id="s", ack=ack))
    producer = _client(server, "producer", log)
    log.clear()
    producer.data_received(_frame("SEND", destination="/queue/q", receipt="r1", **send))
    before, probed = _commands(log), probe()
    await asyncio.sleep(0)  # one loop turn: the flush callbacks scheduled meanwhile run
    after = _commands(log)
    for conn in (consumer, producer):
        conn.close()
    broker.close()
    return before, after, probed


def test_a_send_is_delivered_to_other_clients_before_the_loop_turns() -> None:
    """The RECEIPT goes to the producer first, then the MESSAGE to the consumer, both
    written within the producer's data_received: no flush callback a loop turn later
    (on asyncio's loop that turn was one more epoll_wait and _run_once per message)."""
    before, after, _ = asyncio.run(_one_send(Broker(name="flush")))
    assert before == after == [("producer", "RECEIPT"), ("consumer", "MESSAGE")]


def test_with_a_group_commit_pending_nothing_is_written_before_the_loop_turn(
    tmp_path: Any,
) -> None:
    """A persistent SEND's RECEIPT and its delivery (to an ``ack:client`` consumer, so the
    message stays stored) wait for the flush callback, whose first run commits the writes
    of every connection read in that loop turn (one commit for all): writing the delivery
    at the end of data_received would commit early."""
    from jmspy.broker_ref.store.sqlite_store import SqliteStore

    store = SqliteStore(tmp_path / "m.sqlite", group_commit=True)
    before, after, pending = asyncio.run(
        _one_send(Broker(name="flush", store=store), lambda: store.pending, ack="client",
                  persistent="true"))
    assert pending and before == []
    assert after == [("producer", "RECEIPT"), ("consumer", "MESSAGE")]


def test_a_persistent_send_an_auto_ack_consumer_took_in_its_turn_is_receipted_unwritten(
    tmp_path: Any,
) -> None:
    """The loop turn that stored the message also delivered it to a waiting ``ack:auto``
    consumer, which consumed it: the group commit has nothing left to keep, so nothing
    is written (no fsync), and the RECEIPT and MESSAGE go out at once, as without a store
    (nothing is gained by waiting a loop turn for other connections' writes)."""
    from jmspy.broker_ref.store.sqlite_store import SqliteStore

    store = SqliteStore(tmp_path / "m.sqlite", group_commit=True)
    before, after, _ = asyncio.run(
        _one_send(Broker(name="flush", store=store), persistent="true"))
    assert before == after == [("producer", "RECEIPT"), ("consumer", "MESSAGE")]
    assert store.unwritten == 1


class _Clock:
    """The polling module's clock, moved by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(loop_polling, "_clock", fake)
    return fake


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)  # one loop turn: an open window's callback runs in it


def test_after_a_read_the_loop_polls_until_the_window_ends_then_sleeps(clock: _Clock) -> None:
    async def scenario() -> None:
        broker = Broker(name="spin")
        server = StompServer(broker, heartbeat_ms=0, idle_spin_us=100)
        polling = server.polling
        _client(server, "c", [])  # its CONNECT is a read: a window opens
        assert polling.spinning
        await _turns(5)
        assert polling.spinning and polling.spin.misses == 0  # the loop turned, awake
        clock.now = 0.000_101  # the window's 100 us are up
        await _turns(1)
        assert not polling.spinning and (polling.spin.hits, polling.spin.misses) == (0, 1)
        broker.close()

    asyncio.run(scenario())


def test_a_read_within_the_window_is_a_hit_and_opens_the_next_window(clock: _Clock) -> None:
    async def scenario() -> None:
        broker = Broker(name="spin")
        server = StompServer(broker, heartbeat_ms=0, idle_spin_us=100)
        polling = server.polling
        conn = _client(server, "c", [])
        clock.now = 0.000_090
        conn.data_received(_frame("SEND", destination="/queue/q"))  # 90 us in: a hit
        assert polling.spin.hits == 1
        clock.now = 0.000_150  # past the first window, within the second
        await _turns(2)
        assert polling.spinning and polling.spin.misses == 0
        clock.now = 0.000_191
        await _turns(1)
        assert not polling.spinning and polling.spin.misses == 1
        broker.close()

    asyncio.run(scenario())


def test_a_yield_that_gave_the_cpu_away_ends_the_window_contended_and_the_next_read_sleeps(
    clock: _Clock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop yields the CPU between looks. A yield that returns at once leaves the
    window open; one during which another thread ran (it took longer than GAVE_WAY_S)
    ends it, well before its 100 us are up, and the next read opens no window."""
    yields: list[float] = []

    def fake_yield() -> None:  # how long each yield keeps the loop off the CPU
        clock.now += yields.pop(0) if yields else 0.0

    monkeypatch.setattr(loop_polling, "_yield", fake_yield)

    async def scenario() -> tuple[bool, bool, tuple[int, int, int], bool]:
        broker = Broker(name="spin")
        server = StompServer(broker, heartbeat_ms=0, idle_spin_us=100)
        polling = server.polling
        conn = _client(server, "c", [])
        yields.extend([GAVE_WAY_S / 2, GAVE_WAY_S * 2])
        await _turns(1)
        still_open = polling.spinning  # a short yield: nobody else wanted the CPU
        await _turns(1)
        ended = not polling.spinning  # a long one: another thread ran meanwhile
        spin = polling.spin
        counts = (spin.hits, spin.misses, spin.contentions)
        conn.data_received(_frame("SEND", destination="/queue/q"))
        after = polling.spinning
        broker.close()
        return still_open, ended, counts, after

    assert asyncio.run(scenario()) == (True, True, (0, 0, 1), False)
    assert clock.now < 100e-6  # it ended on the yield, not on the window's time


def test_after_misses_reads_sleep_at_once_for_a_doubling_number_of_waits(
    clock: _Clock,
) -> None:
    """One miss: the next read opens no window, the one after does. Two misses in a row:
    two reads open none."""
    async def scenario() -> list[bool]:
        broker = Broker(name="spin")
        server = StompServer(broker, heartbeat_ms=0, idle_spin_us=100)
        conn = _client(server, "c", [])
        opened: list[bool] = []
        for _ in range(6):
            clock.now += 1.0  # the open window (if any) runs out unanswered
            await _turns(1)
            conn.data_received(_frame("SEND", destination="/queue/q"))
            opened.append(server.polling.spinning)
        broker.close()
        return opened

    # miss 1 -> skip 1 read; the next read polls, misses -> skip 2; the third polls again
    assert asyncio.run(scenario()) == [False, True, False, False, True, False]


def test_an_embedded_server_polls_only_when_asked(clock: _Clock) -> None:
    """``jmspy broker`` asks for the configured window (test_cli.py); a server embedded in
    another program (here, or a vm:// broker's connector) sleeps after every read."""
    async def scenario() -> tuple[bool, bool, bool]:
        broker = Broker(name="spin")
        embedded = StompServer(broker, heartbeat_ms=0, owns_broker=False)
        _client(embedded, "c", [])
        connector = StompServer(broker, core_lock=threading.RLock(), owns_broker=False)
        asked = StompServer(broker, core_lock=threading.RLock(), owns_broker=False,
                            idle_spin_us=DEFAULT_IDLE_SPIN_US)
        broker.close()
        return (embedded.polling.spinning, connector.polling.spin.enabled,
                asked.polling.spin.enabled)

    assert asyncio.run(scenario()) == (False, False, True)
