"""Differential test: the compiled and the pure listener-dispatch twins must agree.

Both ``drain`` functions get the same scripted session: a fake session, connection and
consumer implementing exactly :mod:`jmspy.dispatch_protocol`, a real prefetch buffer, and
a listener that does one scripted thing per message (return, raise, recover, close the
consumer or session, stop the connection, make another consumer ready, deliver more
messages). Every call drain makes into the session is recorded; the traces, the return
value and the buffer counters must be identical. The compiled drain is run over both
buffer twins (it has a typed fast path for the compiled one).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

import jmspy._cext.dispatch as cext
import jmspy._cext.lifecycle as cext_life
import jmspy._cext.prefetch as cext_prefetch
import jmspy._pure.dispatch as pure
import jmspy._pure.lifecycle as pure_life
import jmspy._pure.prefetch as pure_prefetch
from jmspy.dispatch_protocol import DrainFunction
from jmspy.message import Message

_c_check: DrainFunction = cext.drain
_p_check: DrainFunction = pure.drain

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

ACTIONS = (
    "ok", "ok", "ok", "ok", "raise", "recover", "defer", "closing", "stop", "ready",
    "no_listener", "close_consumer", "push", "closed",
)


class Msg:
    __slots__ = ("_acknowledger", "_delivery_tag", "n")

    def __init__(self, n: int) -> None:
        self.n = n
        self._delivery_tag = 1000 + n
        self._acknowledger: Any = None


class Flow:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled


class Conn:
    def __init__(self, life: Any, flow_enabled: bool) -> None:
        self._life = life.ConnectionLife()
        self._life.started = True
        self._flow = Flow(flow_enabled)


class Consumer:
    def __init__(self, buffer: Any) -> None:
        self._lock = threading.Lock()
        self._buffer = buffer
        self._closed = False
        self._listener: Any = None


def _n(message: Any) -> int:
    """A message's number in the script (its delivery tag is 1000 + n)."""
    return int(message._delivery_tag) - 1000


def _real(n: int) -> Message:
    """A real jmspy Message (the slotted class drain meets in use)."""
    message = Message()
    message._delivery_tag = 1000 + n
    return message


def _ack_marker(_message: Any) -> None:
    """Stands in for the session's acknowledger (compared by identity)."""


class Ack:
    """The session's acknowledgement strategy as drain sees it (jmspy.dispatch_protocol.
    DrainAck): ``batch`` > 0 lets drain queue acks, as AutoAcknowledge does."""

    def __init__(self, session: Session, batch: int) -> None:
        self.session = session
        self.batch = batch
        self.acknowledger = _ack_marker
        self.recover_requested = False
        self.pending: list[tuple[Any, int]] = []
        self.most_held = 0  # the longest the queue got

    def delivered(self, consumer: Any, message: Any) -> None:
        self.session.trace.append(("app", _n(message), self.session._current is consumer))
        message._acknowledger = "set-by-session"

    def hold(self, item: tuple[Any, int]) -> None:
        self.pending.append(item)
        self.most_held = max(self.most_held, len(self.pending))

    def held_count(self) -> int:
        return len(self.pending)


class Session:
    """Records every call drain makes; acknowledgement bookkeeping as the real one does."""

    def __init__(self, life: Any, ack_mode: int, consumer: Consumer, ack_batch: int,
                 busy: bool = False) -> None:
        self.ack_mode = ack_mode
        #: the transport declines every offer (an in-process broker's lock held elsewhere)
        self.busy = busy
        self._life = life.SessionLife()  # closing, closed
        self._ready: deque[object] = deque()
        self._deferred: list[object] = []
        self._current: Any = None
        # Only AUTO_ACKNOWLEDGE's strategy lets drain queue acknowledgements.
        self.acknowledgement = Ack(self, ack_batch if ack_mode == 1 else 0)
        self.consumer = consumer
        self.trace: list[tuple[Any, ...]] = []

    def _listener_done(self, consumer: Any, message: Any, ok: bool) -> None:
        # _current names the consumer only while its listener runs (see _flush_acks)
        self.trace.append(("done", _n(message), ok, self._current))
        if ok and self.ack_mode in (1, 100):
            consumer._buffer.consumed(1)

    def _listener_failed(self, listener: Any, message: Any, exc: Exception) -> None:
        self.trace.append(("failed", _n(message), type(exc).__name__, self._current is not None))

    def _flush_acks(self) -> None:
        ack = self.acknowledgement
        items, ack.pending = ack.pending, []
        # None: an exception listener reached from here must not see a listener running
        self.trace.append(("flush", [tag for _, tag in items], self._current))
        if items:
            self.consumer._buffer.consumed(len(items))

    def _offer_acks(self) -> None:
        ack = self.acknowledgement
        self.trace.append(("offer", [tag for _, tag in ack.pending], self._current, self.busy))
        if not self.busy:
            self._flush_acks()


@dataclass
class Script:
    ack_mode: int
    limit: int
    threshold: int
    flow_enabled: bool
    ack_batch: int
    initial: int
    actions: list[str]
    on_message: bool
    real_messages: bool
    #: acks an earlier drain left queued (declined): tags 1..held_before
    held_before: int = 0
    busy: bool = False


scripts = st.builds(
    Script,
    ack_mode=st.sampled_from([1, 1, 1, 2, 3, 0, 4, 100]),
    limit=st.one_of(st.integers(0, 12), st.sampled_from([1000, 40])),
    threshold=st.sampled_from([0, 1, 50, 99, 100]),
    flow_enabled=st.booleans(),
    ack_batch=st.integers(1, 10),
    initial=st.integers(0, 40),
    actions=st.lists(st.sampled_from(ACTIONS), max_size=60),
    on_message=st.booleans(),
    real_messages=st.booleans(),
    held_before=st.integers(0, 12),
    busy=st.booleans(),
)


def run(drain: DrainFunction, prefetch: Any, script: Script) -> tuple[Any, ...]:
    buf = prefetch.PrefetchBuffer(script.limit, script.threshold)
    buf.initial_credit()
    made = 0

    def push(count: int) -> None:
        nonlocal made
        for _ in range(count):
            made += 1
            buf.push(_real(made) if script.real_messages else Msg(made))

    held: list[int] = []
    if script.ack_mode == 1 and script.limit > 0 and not script.flow_enabled:
        # acks an earlier drain of a coalescing session left queued: those messages were
        # delivered and processed, so the buffer counts them unconsumed (tags 1, 2, ...)
        for tag in range(1, script.held_before + 1):
            buf.push(Msg(tag - 1000))
            buf.pop()
            held.append(tag)
    push(script.initial)
    consumer = Consumer(buf)
    # the compiled drain reads the compiled state records' C fields: each twin its own
    life = cext_life if drain is cext.drain else pure_life
    session = Session(life, script.ack_mode, consumer, script.ack_batch, script.busy)
    for tag in held:
        session.acknowledgement.hold((consumer, tag))
    conn = Conn(life, script.flow_enabled)
    actions = iter(script.actions)

    def handle(message: Any) -> None:
        session.trace.append(
            ("listen", _n(message), session._current is consumer, message._acknowledger)
        )
        action = next(actions, "ok")
        if action == "raise":
            raise ValueError("boom")
        if action == "recover":
            session.acknowledgement.recover_requested = True
        elif action == "defer":
            session._deferred.append(consumer)
        elif action == "closing":
            session._life.closing = True
        elif action == "stop":
            conn._life.started = False
        elif action == "ready":
            session._ready.append(object())
        elif action == "no_listener":
            consumer._listener = None
        elif action == "close_consumer":
            consumer._closed = True
        elif action == "push":
            push(3)
        elif action == "closed":
            session._life.closed = True

    class Listener:
        def on_message(self, message: Any) -> None:
            handle(message)

    consumer._listener = Listener() if script.on_message else handle
    handled = drain(session, conn, consumer)
    assert session._current is None, "drain must not leave a listener marked as running"
    # Each run has its own Consumer object: name it, so runs compare by behaviour.
    return (
        handled,
        _named(session.trace, consumer),
        buf.stats(),
        _named(session.acknowledgement.pending, consumer),
        session.acknowledgement.most_held,
    )


def _named(value: Any, consumer: Consumer) -> Any:
    if value is consumer:
        return "<consumer>"
    if isinstance(value, list | tuple):
        return type(value)(_named(v, consumer) for v in value)
    return value


@SETTINGS
@given(script=scripts)
def test_twins_agree(script: Script) -> None:
    expected = run(pure.drain, pure_prefetch, script)
    assert run(cext.drain, cext_prefetch, script) == expected
    assert run(cext.drain, pure_prefetch, script) == expected
    assert run(pure.drain, cext_prefetch, script) == expected


@SETTINGS
@given(script=scripts)
def test_every_ok_auto_message_is_acked_after_its_listener_and_once(script: Script) -> None:
    """AUTO coalescing never acks a message before its listener ran, nor twice, and
    leaves nothing queued when drain returns (unless the session was closed under it, or
    the transport declined drain's last offer: then exactly what it offered)."""
    handled, trace, _, leftover, _ = run(pure.drain, pure_prefetch, script)
    listened: set[int] = set()
    acked: list[int] = []
    for event in trace:
        if event[0] == "listen":
            listened.add(event[1])
        elif event[0] in ("flush", "offer"):
            assert event[2] is None  # no listener is marked as running during a flush
        if event[0] == "flush":
            for tag in event[1]:
                assert tag <= script.held_before or tag - 1000 in listened
            acked.extend(event[1])
    assert len(acked) == len(set(acked))
    if not any(a == "closed" for a in script.actions):
        declined = trace[-1][1] if trace and trace[-1][0] == "offer" and script.busy else []
        assert [tag for _, tag in leftover] == declined
    assert handled == len(listened)


@SETTINGS
@given(script=scripts)
def test_acks_left_by_an_earlier_drain_count_against_the_batch_bound(script: Script) -> None:
    """Declined acks queued before drain started are held like its own: the queue never
    grows past ``ack_batch`` (or one past what was already queued)."""
    if script.ack_mode == 1 and script.limit > 0 and not script.flow_enabled:
        for drain, prefetch in ((pure.drain, pure_prefetch), (cext.drain, cext_prefetch)):
            most_held = run(drain, prefetch, script)[4]
            assert most_held <= max(script.ack_batch, script.held_before + 1)
