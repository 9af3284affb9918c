"""Idle connections, one address's share of the connections, and the input budget, at the
asyncio host without sockets: the host's connection objects get recording transports with
made-up peer addresses, on an event loop whose clock the test moves by hand, so timeouts
fire by the fake clock (no sleeps, no timing asserted) and every refusal and close is
checked in ``Broker.usage()``."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from jmspy import _speedups
from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.stomp.server import ConnectionLimits, StompServer, _Connection
from jmspy.stomp_frames import CodecLimits

_codec: Any = _speedups.load("stomp_codec")


class _FakeClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` moves only when the test says: timers (call_later)
    fire on the first loop turn after the clock passes them."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000.0

    def time(self) -> float:
        return self.now


class _Transport(asyncio.Transport):
    """Records writes, pauses and closes; its peer is the address the test chose."""

    def __init__(self, address: str) -> None:
        super().__init__()
        self.address = address
        self.parser = _codec.FrameParser("1.2", None, False)
        self.reading = True
        self.closed = False

    def frames(self) -> list[Any]:
        return [f for f in iter(self.parser.next_frame, None) if f is not _codec.HEARTBEAT]

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.parser.feed(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return (self.address, 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def is_reading(self) -> bool:
        return self.reading

    def pause_reading(self) -> None:
        assert self.reading, "paused twice"
        self.reading = False

    def resume_reading(self) -> None:
        assert not self.reading, "resumed while reading"
        self.reading = True

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


def _run(scenario: Callable[[_FakeClockLoop], Awaitable[None]]) -> None:
    with asyncio.Runner(loop_factory=_FakeClockLoop) as runner:
        loop = runner.get_loop()
        assert isinstance(loop, _FakeClockLoop)
        runner.run(scenario(loop))


async def _advance(loop: _FakeClockLoop, seconds: float) -> None:
    loop.now += seconds
    for _ in range(3):
        await asyncio.sleep(0)  # loop turns: the timers now due run in them


def _open(server: StompServer, address: str = "10.0.0.1",
          heart_beat: str | None = "0,0") -> tuple[_Connection, _Transport]:
    conn = _Connection(server)
    transport = _Transport(address)
    conn.connection_made(transport)
    if heart_beat is not None and not transport.closed:
        conn.data_received(f"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:{heart_beat}\n"
                           "\n\0".encode())
        assert [f.command for f in transport.frames()] == ["CONNECTED"]
    return conn, transport


def test_a_client_without_heart_beats_that_sends_nothing_is_closed_after_idle_timeout() -> None:
    async def scenario(loop: _FakeClockLoop) -> None:
        broker = Broker(name="idle")
        server = StompServer(broker, heartbeat_ms=10_000,
                             connection_limits=ConnectionLimits(idle_timeout=60))
        conn, t = _open(server)  # heart-beat 0,0: nothing negotiated towards the broker
        await _advance(loop, 30)
        conn.data_received(b"\n")  # a bare EOL counts as something received
        await _advance(loop, 59)
        assert not t.closed  # 59 s since the last byte
        await _advance(loop, 2)
        assert t.closed
        (error,) = t.frames()
        assert error.command == "ERROR" and error.header("message") == "idle timeout"
        body = error.body.decode()
        assert "nothing received or delivered for 60 s ([limits] idle-timeout)" in body
        assert "heart-beat" in body
        usage = broker.usage()
        assert usage["connectionsClosedIdle"] == 1 and usage["connectionsRefused"] == 0
        assert conn not in server.connections  # its place is free again

    _run(scenario)


def test_deliveries_keep_a_consumer_that_sends_nothing_from_being_idle() -> None:
    """An ack:auto consumer without heart-beats sends nothing while messages flow to it:
    frames written to it count as traffic; once they stop, the idle timeout runs."""

    async def scenario(loop: _FakeClockLoop) -> None:
        broker = Broker(name="busy")
        server = StompServer(broker, heartbeat_ms=10_000,
                             connection_limits=ConnectionLimits(idle_timeout=60))
        consumer, tc = _open(server, "10.0.0.1")
        consumer.data_received(b"SUBSCRIBE\nid:s\ndestination:/queue/work\nack:auto\n\n\0")
        producer, _ = _open(server, "10.0.0.2", heart_beat="10000,0")
        for i in range(4):  # 160 s of deliveries 40 s apart; the producer beats meanwhile
            await _advance(loop, 20)
            producer.data_received(b"\n")
            await _advance(loop, 20)
            producer.data_received(f"SEND\ndestination:/queue/work\n\nm{i}\0".encode())
            await _advance(loop, 0)  # the delivery's flush runs
        assert [f.body for f in tc.frames()] == [b"m0", b"m1", b"m2", b"m3"]
        assert not tc.closed
        for _ in range(4):
            await _advance(loop, 20)
            producer.data_received(b"\n")
        assert tc.closed and broker.usage()["connectionsClosedIdle"] == 1
        assert [f.header("message") for f in tc.frames()] == ["idle timeout"]

    _run(scenario)


def test_heart_beat_eols_alone_keep_a_connection_alive_and_silence_past_them_closes_it(
) -> None:
    async def scenario(loop: _FakeClockLoop) -> None:
        broker = Broker(name="beats")
        server = StompServer(broker, heartbeat_ms=10_000,
                             connection_limits=ConnectionLimits(idle_timeout=60))
        conn, t = _open(server, heart_beat="10000,0")  # beats every 10 s towards us
        for _ in range(20):  # 180 s, three idle-timeouts, of nothing but EOLs
            await _advance(loop, 9)
            conn.data_received(b"\n")
        assert not t.closed and t.frames() == []
        await _advance(loop, 25)  # silent past twice the heart-beat interval
        assert t.closed
        usage = broker.usage()
        assert usage["connectionsClosedHeartbeat"] == 1 and usage["connectionsClosedIdle"] == 0

    _run(scenario)


def test_one_address_gets_a_tenth_of_the_connections_by_default_and_others_still_get_in(
) -> None:
    async def scenario(loop: _FakeClockLoop) -> None:
        broker = Broker(name="share")
        server = StompServer(broker, heartbeat_ms=0)  # default limits: 1000, 100 per address
        assert server.connection_limits.per_address_cap == 100
        crowd = [_open(server, "10.0.0.1") for _ in range(100)]
        assert not any(t.closed for _, t in crowd)
        _, refused = _open(server, "10.0.0.1", heart_beat=None)
        assert refused.closed
        (error,) = refused.frames()
        assert error.command == "ERROR" and error.header("message") == "too many connections"
        assert "max-connections-per-address = 100" in error.body.decode()
        _, other = _open(server, "10.0.0.2")  # another address still gets in
        assert not other.closed
        usage = broker.usage()
        assert usage["connectionsRefusedPerAddress"] == 1 and usage["connectionsRefused"] == 1
        crowd[0][0].close()  # one of the crowd leaves: its address may open one more
        _, again = _open(server, "10.0.0.1")
        assert not again.closed

    _run(scenario)


def test_the_per_address_cap_follows_max_connections_and_zero_turns_it_off() -> None:
    assert ConnectionLimits(max_connections=50).per_address_cap == 5
    assert ConnectionLimits(max_connections=5).per_address_cap == 1
    assert ConnectionLimits(max_connections=0).per_address_cap == 0
    assert ConnectionLimits(max_connections_per_address=0).per_address_cap == 0
    assert ConnectionLimits(max_connections_per_address=7).per_address_cap == 7


def _partial_send(body: int) -> bytes:
    return b"SEND\ndestination:/queue/big\n\n" + b"x" * body


def test_frames_being_read_share_one_budget_and_small_frames_pass_while_it_is_spent() -> None:
    async def scenario(loop: _FakeClockLoop) -> None:
        broker = Broker(name="budget")
        server = StompServer(broker, heartbeat_ms=0,
                             limits=CodecLimits(max_frame_bytes=10_000),
                             connection_limits=ConnectionLimits(input_budget=1_000))
        a, ta = _open(server, "10.0.0.1")
        b, tb = _open(server, "10.0.0.2")
        c, tc = _open(server, "10.0.0.3")
        a.data_received(_partial_send(600))
        assert ta.reading and broker.usage()["inputBytes"] > 600
        b.data_received(_partial_send(600))  # the budget is spent: b stops being read
        assert not tb.reading and ta.reading  # a, holding most, finishes its frame
        c.data_received(b"SEND\ndestination:/queue/small\nreceipt:r\n\nhi\0")
        assert [f.command for f in tc.frames()] == ["RECEIPT"] and tc.reading
        assert broker.usage()["inputPaused"] == 1
        a.data_received(b"x" * 2_000 + b"\0")  # a's frame completes: its bytes come back
        assert tb.reading  # b is read again
        usage = broker.usage()
        assert usage["inputPaused"] == 0 and usage["inputPauses"] == 1
        assert broker.stats("big").message_count == 1
        b.data_received(b"\0")
        assert broker.stats("big").message_count == 2 and broker.usage()["inputBytes"] == 0

    _run(scenario)


def test_a_closed_connection_gives_its_unfinished_frame_back_to_the_budget() -> None:
    async def scenario(loop: _FakeClockLoop) -> None:
        broker = Broker(name="budget-close")
        server = StompServer(broker, heartbeat_ms=0,
                             connection_limits=ConnectionLimits(input_budget=1_000))
        a, _ = _open(server, "10.0.0.1")
        b, tb = _open(server, "10.0.0.2")
        a.data_received(_partial_send(900))
        b.data_received(_partial_send(300))
        assert not tb.reading
        a.connection_lost(None)  # the finisher goes away mid-frame
        assert tb.reading
        assert broker.usage()["inputBytes"] == b.session.input_buffered

    _run(scenario)


def test_a_big_frame_read_leaves_no_buffer_behind_on_a_connection_that_stays() -> None:
    """A parser's buffer keeps the size of the biggest frame it read until more input
    comes: an idle connection that once sent a frame of several MiB held them for as
    long as it stayed (40 such connections: 390 MB of the broker's RSS), outside the
    input budget and every stat. Traced by tracemalloc: the frame's bytes are freed
    once it is acted on, on the connection that stays open and after it closes."""
    async def scenario(loop: _FakeClockLoop) -> None:
        broker = Broker(name="big-frame")
        server = StompServer(broker, heartbeat_ms=0)
        conn, transport = _open(server, "10.0.0.1")
        frame = b"SEND\ndestination:/topic/nobody\nreceipt:r\n\n" + b"z" * (4 << 20) + b"\0"
        chunks = [frame[i:i + (256 << 10)] for i in range(0, len(frame), 256 << 10)]
        del frame
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            while chunks:
                conn.data_received(chunks.pop(0))
            assert [f.command for f in transport.frames()] == ["RECEIPT"]
            held = tracemalloc.get_traced_memory()[0] - before  # the chunks are freed
            conn.connection_lost(None)
            after_close = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert held < 1 << 20, f"{held:,} bytes still held after the frame"
        assert after_close < 1 << 20, f"{after_close:,} bytes held after the close"

    _run(scenario)


def test_the_limits_table_reads_the_new_keys_and_their_defaults() -> None:
    from jmspy.broker_ref.config import BrokerConfig, ConfigError, parse_config

    defaults = BrokerConfig()
    assert (defaults.idle_timeout, defaults.input_budget, defaults.max_frame_bytes,
            defaults.login_address_refuse_after) == (60, 64 * 1024**2, 10 * 1024**2, 30)
    assert defaults.max_connections_per_address is None  # a tenth of max-connections
    cfg = parse_config({"limits": {"idle-timeout": 5, "input-budget": "32 MB",
                                   "max-connections-per-address": 0,
                                   "login-address-refuse-after": 50}}, "t.toml")
    assert (cfg.idle_timeout, cfg.input_budget, cfg.max_connections_per_address,
            cfg.login_address_refuse_after) == (5, 32 * 1024**2, 0, 50)
    assert parse_config({"limits": {"input-budget": 4096}}, "t.toml").input_budget == 4096
    with pytest.raises(ConfigError, match="input-budget = 'lots' is not a size"):
        parse_config({"limits": {"input-budget": "lots"}}, "t.toml")
    with pytest.raises(ConfigError, match="idle-timeout = -1 must be >= 0"):
        parse_config({"limits": {"idle-timeout": -1}}, "t.toml")


def test_jmspy_stat_says_what_was_turned_away_and_what_frames_being_read_hold() -> None:
    from jmspy.broker_ref.protocols.stomp.client import format_usage

    broker = Broker(name="stat")
    usage = {k: str(v) for k, v in broker.usage().items() if v is not None}
    assert "turned away" not in format_usage(usage)  # nothing happened: nothing said
    from jmspy.broker_ref.core.listener_stats import Closed, Refused

    broker.listeners.refuse(Refused.PER_ADDRESS)
    broker.listeners.close(Closed.IDLE_TIMEOUT)
    broker.listeners.input.hold("c", 1024**2)
    usage = {k: str(v) for k, v in broker.usage().items() if v is not None}
    line = format_usage(usage)
    assert "connections turned away: per address 1, closed: idle-timeout 1" in line
    assert "frames being read 1.0 MB of 64.0 MB (0 connections paused)" in line
