"""Differential test: the compiled and the pure prefetch twins must be indistinguishable.

Imports both twins directly, whatever JMSPY_PUREPYTHON says, and feeds them the same
random operation sequences. After every step the return value (or the exception type;
the message too for the errors we raise ourselves), the popped/drained objects (by
identity) and every counter must be identical.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import jmspy._cext.prefetch as cext
import jmspy._pure.prefetch as pure
from jmspy.prefetch_protocol import STATS_FIELDS as COUNTERS
from jmspy.prefetch_protocol import PrefetchBufferProtocol

_c_check: type[PrefetchBufferProtocol] = cext.PrefetchBuffer
_p_check: type[PrefetchBufferProtocol] = pure.PrefetchBuffer

#: Errors whose text we write ourselves (identical in both twins); others come from the
#: runtimes' own integer conversion and only their type is compared.
OWN_MESSAGES = (ValueError, RuntimeError)

SETTINGS = settings(
    max_examples=400,
    deadline=None,
    database=None,  # no .hypothesis/ directory in the shared checkout
    suppress_health_check=[HealthCheck.too_slow],
)

# Mostly small counts around the interesting boundaries, sometimes anything (negative,
# past a C Py_ssize_t) to check that both twins refuse the same inputs the same way.
counts = st.one_of(
    st.integers(0, 12),
    st.integers(-2, 2),
    st.integers(-3, 1100),
    st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**80]),
)
limits = st.one_of(st.integers(0, 12), st.integers(-2, 1100), st.sampled_from([2**31 - 1, 2**31]))
thresholds = st.one_of(st.sampled_from([0, 1, 49, 50, 51, 99, 100]), st.integers(-2, 102))


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("ok", call())
    except OWN_MESSAGES as exc:
        return ("raised", (type(exc), str(exc)))
    except (TypeError, OverflowError) as exc:
        return ("raised", type(exc))


def same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    """Same outcome; pushed objects (and lists of them) are compared by identity."""
    if a[0] != b[0]:
        return False
    x, y = a[1], b[1]
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(i is j for i, j in zip(x, y, strict=True))
    if isinstance(x, Item):
        return x is y
    return type(x) is type(y) and x == y


def snapshot(buf: PrefetchBufferProtocol) -> tuple[int, ...]:
    props = tuple(getattr(buf, name) for name in COUNTERS)
    assert props == buf.stats()
    assert len(buf) == buf.buffered
    assert all(type(v) is int for v in props)
    return props


class Item:
    """A delivered message stand-in: pops must hand back this very object."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Item({self.n})"


@SETTINGS
@given(limit=limits, threshold=thresholds)
def test_twins_agree_on_construction(limit: int, threshold: int) -> None:
    made_c = outcome(lambda: cext.PrefetchBuffer(limit, threshold).stats())
    made_p = outcome(lambda: pure.PrefetchBuffer(limit, threshold).stats())
    assert made_c == made_p


@SETTINGS
@given(limit=limits, threshold=thresholds, unconsumed=counts, outstanding=counts)
def test_twins_agree_on_the_top_up_rule(
    limit: int, threshold: int, unconsumed: int, outstanding: int
) -> None:
    got_c = outcome(lambda: cext.top_up(limit, threshold, unconsumed, outstanding))
    got_p = outcome(lambda: pure.top_up(limit, threshold, unconsumed, outstanding))
    assert got_c == got_p


def test_the_top_up_rule_refills_in_batches_at_the_threshold() -> None:
    for twin in (cext, pure):
        # limit 1000, threshold 50 %: nothing until unconsumed + credit falls to 500
        assert [twin.top_up(1000, 50, u, 0) for u in (1000, 501, 500, 0)] == [0, 0, 500, 1000]
        assert twin.top_up(1000, 50, 200, 300) == 500  # credit not yet used counts too
        assert twin.top_up(0, 50, 0, 0) == 0  # pull mode asks one at a time, elsewhere
        with pytest.raises(ValueError, match="percentage between 0 and 100"):
            twin.top_up(10, 101, 0, 0)


def pushing(item: object) -> Callable[[PrefetchBufferProtocol], None]:
    return lambda b: b.push(item)


class TwinMachine(RuleBasedStateMachine):
    """Every rule runs the same call on both twins and requires the same outcome; the
    invariant then requires the same counters. Rules are weighted towards the hot path
    (push, pop, consumed) and local redelivery so buffers get deep and wrap around."""

    def __init__(self) -> None:
        super().__init__()
        self.c: PrefetchBufferProtocol = cext.PrefetchBuffer(0, 0)
        self.p: PrefetchBufferProtocol = pure.PrefetchBuffer(0, 0)
        self.taken: list[object] = []
        self.made = 0

    def both(self, call: Callable[[PrefetchBufferProtocol], Any]) -> Any:
        got_c = outcome(lambda: call(self.c))
        got_p = outcome(lambda: call(self.p))
        assert same(got_c, got_p), (got_c, got_p)
        return got_c

    @initialize(
        limit=st.one_of(st.integers(0, 12), st.integers(0, 1100), st.just(2**31 - 1)),
        threshold=st.one_of(st.sampled_from([0, 1, 49, 50, 51, 99, 100]), st.integers(0, 100)),
    )
    def make(self, limit: int, threshold: int) -> None:
        self.c = cext.PrefetchBuffer(limit, threshold)
        self.p = pure.PrefetchBuffer(limit, threshold)

    @rule()
    def initial_credit(self) -> None:
        self.both(lambda b: b.initial_credit())

    @rule(k=st.integers(1, 12), none=st.sampled_from([False] * 9 + [True]))
    def push(self, k: int, none: bool) -> None:
        for _ in range(k):
            item = None if none else Item(self.made)
            self.made += 1
            self.both(pushing(item))

    @rule(
        k=st.integers(0, 40),
        none_at=st.sampled_from([-1] * 8 + [0, 1, 5]),
        fresh=st.sampled_from([False, False, True]),
    )
    def push_many(self, k: int, none_at: int, fresh: bool) -> None:
        """A run of deliveries (vm:// batch delivery): the same as k pushes, including a
        None part-way (the items before it stay pushed, the rest are not)."""
        items: list[object | None] = []
        for i in range(k):
            items.append(None if i == none_at else Item(self.made))
            self.made += 1
        self.both(lambda b: b.push_many(iter(items) if fresh else items))

    @rule(k=st.integers(1, 8))
    def pop(self, k: int) -> None:
        for _ in range(k):
            _, item = self.both(lambda b: b.pop())
            if item is not None:
                self.taken.append(item)

    @rule(k=st.integers(1, 8), n=st.one_of(st.just(1), counts))
    def consumed(self, k: int, n: int) -> None:
        for _ in range(k):
            self.both(lambda b: b.consumed(n))

    @rule(
        back=st.integers(0, 6),
        none_at=st.sampled_from([-1] * 6 + [0, 1, 2]),
        fresh=st.sampled_from([False] * 4 + [True]),
    )
    def push_front(self, back: int, none_at: int, fresh: bool) -> None:
        # Most recently taken items go back (local redelivery); sometimes a brand-new
        # batch, sometimes with a None slipped in (refused by both, nothing changes).
        if fresh:
            items: list[object | None] = [Item(-1 - i) for i in range(back)]
        else:
            items = list(self.taken[len(self.taken) - back :]) if back else []
        if 0 <= none_at < len(items):
            items.insert(none_at, None)
        kind, _ = self.both(lambda b: b.push_front(tuple(items) if fresh else items))
        if kind == "ok" and not fresh and back:
            del self.taken[len(self.taken) - back :]

    @rule(method=st.sampled_from(["wanted", "pull_credit", "drain", "consumed"]))
    def without_a_count(self, method: str) -> None:
        self.both(lambda b: getattr(b, method)())

    @rule(method=st.sampled_from(["granted", "revoked", "forget"]), n=counts)
    def with_a_count(self, method: str, n: int) -> None:
        self.both(lambda b: getattr(b, method)(n))

    @rule(
        method=st.sampled_from(["consumed", "granted", "revoked", "forget"]),
        bad=st.sampled_from([1.0, "1", None]),
    )
    def non_integer_count(self, method: str, bad: object) -> None:
        self.both(lambda b: getattr(b, method)(bad))

    @invariant()
    def same_counters(self) -> None:
        assert snapshot(self.c) == snapshot(self.p)

    @invariant()
    def wanted_is_the_shared_rule(self) -> None:
        # the rule the broker's STOMP session applies to the core's credit is the one
        # the buffer applies to its own counters (the broker keeps no second window)
        for twin, buf in ((cext, self.c), (pure, self.p)):
            if max(buf.unconsumed, buf.outstanding) > twin.MAX_COUNT:
                continue  # past any window (a test of the counters' own limits)
            assert buf.wanted() == twin.top_up(
                buf.limit, buf.threshold, buf.unconsumed, buf.outstanding)

    def teardown(self) -> None:
        # Whatever is left comes out the same objects in the same order.
        self.both(lambda b: b.drain())


TwinMachine.TestCase.settings = settings(SETTINGS, max_examples=300, stateful_step_count=80)
test_twins_agree_step_by_step = TwinMachine.TestCase


@SETTINGS
@given(
    limit=st.integers(1, 300),
    threshold=st.integers(0, 100),
    consumer_lag=st.integers(0, 40),
    available=st.integers(0, 2000),
    cap=st.integers(1, 400),
)
def test_twins_agree_in_a_flow_loop(
    limit: int, threshold: int, consumer_lag: int, available: int, cap: int
) -> None:
    """A realistic loop (broker with a finite queue, a connection-level cap on grants,
    a consumer that acknowledges late) ends with identical counters and batches."""

    def run(cls: type[PrefetchBufferProtocol]) -> tuple[Any, ...]:
        buf = cls(limit, threshold)  # type: ignore[call-arg]
        left, sent, asks, got = available, 0, [], []

        def grant(n: int) -> None:
            nonlocal left, sent
            n = min(n, cap)
            asks.append(n)
            if n:
                buf.granted(n)
            while buf.outstanding and left:
                buf.push(sent)
                sent += 1
                left -= 1

        first = buf.initial_credit()
        if first > cap:  # the connection cap applies to the first grant too
            buf.revoked(first - cap)
        grant(0)
        pending = 0
        while (item := buf.pop()) is not None:
            got.append(item)
            pending += 1
            if pending > consumer_lag:
                grant(buf.consumed(pending))
                pending = 0
            elif not buf.buffered:
                grant(buf.wanted())
        if pending:
            buf.consumed(pending)
        return (got, asks, buf.stats())

    assert run(cext.PrefetchBuffer) == run(pure.PrefetchBuffer)


def test_compiled_twin_really_is_compiled() -> None:
    # The .pxd was applied: counters are C-level descriptors and there is no __dict__
    # (a .pxd that Cython did not find would leave them as missing Python attributes).
    assert cext.__file__ is not None and not cext.__file__.endswith(".py")
    for name in COUNTERS:
        assert type(vars(cext.PrefetchBuffer)[name]).__name__ == "getset_descriptor"
    assert not hasattr(cext.PrefetchBuffer(1, 50), "__dict__")
    assert not hasattr(pure.PrefetchBuffer(1, 50), "__dict__")
    assert cext.MAX_LIMIT == pure.MAX_LIMIT


def test_both_twins_satisfy_the_protocol() -> None:
    assert isinstance(cext.PrefetchBuffer(10, 50), PrefetchBufferProtocol)
    assert isinstance(pure.PrefetchBuffer(10, 50), PrefetchBufferProtocol)
    public = {n for n in dir(pure.PrefetchBuffer) if not n.startswith("_")}
    assert public == {n for n in dir(cext.PrefetchBuffer) if not n.startswith("_")}
