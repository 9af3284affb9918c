"""Behaviour of the prefetch buffer / Open MQ consumer flow window (seed 004).

Runs against whichever twin ``jmspy._speedups.load("prefetch")`` picks (the compiled one
unless JMSPY_PUREPYTHON=1); tests/test_prefetch_twins.py compares the twins directly.
"""

from __future__ import annotations

import pytest

from jmspy._speedups import load
from jmspy.prefetch_protocol import STATS_FIELDS, PrefetchBufferProtocol

prefetch = load("prefetch")
PrefetchBuffer = prefetch.PrefetchBuffer


def make(limit: int = 1000, threshold: int = 50) -> PrefetchBufferProtocol:
    buf: PrefetchBufferProtocol = PrefetchBuffer(limit, threshold)
    return buf


def deliver(buf: PrefetchBufferProtocol, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        buf.push(i)


def take_and_consume(buf: PrefetchBufferProtocol, n: int) -> list[int]:
    """Take and acknowledge ``n`` items one by one; return what each consumed() returned."""
    asks = []
    for _ in range(n):
        assert buf.pop() is not None
        asks.append(buf.consumed())
    return asks


class FakeBroker:
    """Delivers from a finite queue as long as the consumer holds credit."""

    def __init__(self, available: int) -> None:
        self.available = available
        self.sent = 0
        self.batch_sizes: list[int] = []

    def grant(self, buf: PrefetchBufferProtocol, n: int) -> None:
        if n:
            self.batch_sizes.append(n)
        while buf.outstanding and self.available:
            buf.push(self.sent)
            self.sent += 1
            self.available -= 1


def test_satisfies_protocol() -> None:
    assert isinstance(make(), PrefetchBufferProtocol)


# -- the seed's numbers ------------------------------------------------------------------


def test_default_window_initial_batch_then_top_up_at_half() -> None:
    buf = make(1000, 50)
    assert buf.initial_credit() == 1000
    assert (buf.outstanding, buf.batches) == (1000, 1)
    deliver(buf, 1000)
    assert (buf.buffered, buf.unconsumed, buf.outstanding) == (1000, 1000, 0)
    assert buf.pauses == 1  # window full and no credit left: the broker stops

    assert take_and_consume(buf, 499) == [0] * 499
    assert buf.unconsumed == 501
    assert buf.pop() == 499
    assert buf.consumed() == 500
    assert buf.unconsumed == 500
    # Not reserved: asking again gives the same answer until granted() is called.
    assert buf.wanted() == 500
    buf.granted(500)
    assert (buf.outstanding, buf.batches, buf.wanted()) == (500, 2, 0)

    # Second cycle: 500 more arrive, back to 1000 unconsumed, same pattern again.
    deliver(buf, 500, start=1000)
    assert (buf.unconsumed, buf.outstanding, buf.pauses) == (1000, 0, 2)
    asks = take_and_consume(buf, 500)
    assert asks == [0] * 499 + [500]
    buf.granted(500)
    assert buf.batches == 3
    assert (buf.delivered_total, buf.consumed_total) == (1500, 1000)


def run_consumer(buf: PrefetchBufferProtocol, broker: FakeBroker) -> list[object]:
    """Take and acknowledge everything, granting each top-up; return the items in order."""
    broker.grant(buf, buf.initial_credit())
    seen: list[object] = []
    while (item := buf.pop()) is not None:
        seen.append(item)
        want = buf.consumed()
        if want:
            buf.granted(want)
            broker.grant(buf, want)
    return seen


def test_fifo_order_across_cycles() -> None:
    buf = make(4, 50)
    broker = FakeBroker(available=10)
    assert run_consumer(buf, broker) == list(range(10))
    # 4, then top-ups of 2 at each half-window.
    assert broker.batch_sizes[:4] == [4, 2, 2, 2]


def test_only_1500_available_gives_batches_of_1000_then_500() -> None:
    buf = make(1000, 50)
    broker = FakeBroker(available=1500)
    delivered_per_grant = []
    broker.grant(buf, buf.initial_credit())
    delivered_per_grant.append(broker.sent)
    while buf.pop() is not None:
        want = buf.consumed()
        if want:
            buf.granted(want)
            before = broker.sent
            broker.grant(buf, want)
            delivered_per_grant.append(broker.sent - before)
    # What arrived: 1000, then 500 ("if enough are available"), then nothing.
    assert [n for n in delivered_per_grant if n] == [1000, 500]
    assert (buf.delivered_total, buf.consumed_total) == (1500, 1500)
    assert (buf.unconsumed, buf.buffered) == (0, 0)
    # What was asked: 1000, 500 (delivered), 500 (queue empty, stays outstanding), and a
    # last 500 once the buffer emptied: the full window of 1000 stays open at the broker.
    # Unused credit counts as on its way, so there is no one-credit-per-message dribble.
    assert broker.batch_sizes == [1000, 500, 500, 500]
    assert buf.batches == 4
    assert buf.outstanding == 1000
    # The unused window stays outstanding until the broker hands the credit back.
    assert (buf.outstanding, buf.wanted()) == (1000, 0)
    buf.revoked(1000)
    assert buf.outstanding == 0
    assert buf.wanted() == 1000


# -- threshold edge cases ----------------------------------------------------------------


def test_threshold_zero_tops_up_only_when_everything_is_consumed() -> None:
    buf = make(10, 0)
    buf.initial_credit()
    deliver(buf, 10)
    assert take_and_consume(buf, 10) == [0] * 9 + [10]


def test_threshold_hundred_tops_up_one_per_consumption() -> None:
    buf = make(10, 100)
    assert buf.initial_credit() == 10
    # Before the window is full the broker still holds the credit: nothing to ask for.
    deliver(buf, 5)
    assert buf.wanted() == 0
    deliver(buf, 5, start=5)
    for i in range(10):
        assert buf.pop() == i
        assert buf.consumed() == 1
        buf.granted(1)
        buf.push(100 + i)
    assert buf.batches == 11


def test_consumed_many_at_once() -> None:
    buf = make(100, 50)
    buf.initial_credit()
    deliver(buf, 100)
    for _ in range(60):
        buf.pop()
    assert buf.consumed(49) == 0
    assert buf.consumed(11) == 60  # 40 unconsumed, nothing outstanding
    assert buf.consumed(0) == 60  # consumed(0) is just wanted()


def test_outstanding_credit_counts_as_on_its_way() -> None:
    buf = make(10, 50)
    buf.initial_credit()
    deliver(buf, 6)  # 4 credits still with the broker (its queue ran dry)
    for _ in range(6):
        buf.pop()
    # 5 unconsumed + 4 promised = 9 > 5: no request yet (no one-credit dribble).
    assert buf.consumed(1) == 0
    # 1 unconsumed + 4 promised = 5 = 10 x 50%: top up to 10, less the 4 still granted.
    assert buf.consumed(4) == 5
    assert buf.wanted() == 5  # not reserved
    buf.granted(5)
    assert buf.wanted() == 0


def test_wanted_is_zero_above_threshold_and_when_overfull() -> None:
    buf = make(10, 50)
    buf.initial_credit()
    deliver(buf, 12)  # a broker that over-delivers
    assert buf.wanted() == 0
    assert buf.consumed(7) == 5  # 5 unconsumed, no credit outstanding


# -- pull mode ---------------------------------------------------------------------------


def test_pull_mode_one_credit_per_receive() -> None:
    buf = make(0, 50)
    assert buf.initial_credit() == 0
    assert (buf.outstanding, buf.batches) == (0, 0)
    assert buf.pull_credit() == 1
    assert (buf.outstanding, buf.batches) == (1, 1)
    assert buf.pull_credit() == 0  # already in flight
    buf.push("m1")
    assert buf.outstanding == 0
    assert buf.pull_credit() == 0  # something buffered: take it first
    assert buf.pop() == "m1"
    assert buf.consumed() == 0  # pull mode never tops up
    assert buf.wanted() == 0
    assert buf.pull_credit() == 1
    assert buf.batches == 2
    assert buf.pauses == 0  # pauses are a limit > 0 notion


def test_pull_credit_is_zero_with_a_window() -> None:
    buf = make(10, 50)
    assert buf.pull_credit() == 0
    buf.initial_credit()
    deliver(buf, 10)
    buf.drain()
    buf.revoked(100)
    assert buf.pull_credit() == 0


# -- pauses ------------------------------------------------------------------------------


def test_pauses_count_each_time_credit_runs_out_on_a_full_window() -> None:
    buf = make(4, 50)
    buf.initial_credit()
    deliver(buf, 3)
    assert buf.pauses == 0
    buf.push(3)
    assert buf.pauses == 1
    for _ in range(2):
        buf.pop()
    assert buf.consumed(2) == 2
    buf.granted(2)
    buf.push(4)
    assert buf.pauses == 1  # credit left: not a pause
    buf.push(5)
    assert buf.pauses == 2


def test_no_pause_when_credit_ran_out_below_the_window() -> None:
    buf = make(4, 50)
    buf.granted(2)  # e.g. a connection cap granted less than the window
    deliver(buf, 2)
    assert (buf.outstanding, buf.pauses) == (0, 0)


# -- drain / forget / revoked / push_front -----------------------------------------------


def test_drain_returns_buffered_items_to_the_broker() -> None:
    buf = make(10, 50)
    buf.initial_credit()
    deliver(buf, 6)
    assert buf.pop() == 0
    assert buf.pop() == 1
    assert buf.drain() == [2, 3, 4, 5]
    assert (buf.buffered, buf.unconsumed, len(buf)) == (0, 2, 0)
    assert buf.pop() is None
    assert buf.drain() == []
    # The two taken ones are rolled back too.
    buf.forget(2)
    assert buf.unconsumed == 0
    assert (buf.delivered_total, buf.consumed_total) == (6, 0)
    buf.revoked(4)
    assert buf.outstanding == 0


def test_drain_never_takes_unconsumed_below_zero() -> None:
    buf = make(10, 50)
    deliver(buf, 3)
    buf.consumed(3)  # acknowledged before being taken (unusual but allowed)
    assert buf.drain() == [0, 1, 2]
    assert buf.unconsumed == 0


def test_forget_too_many_is_an_error() -> None:
    buf = make(10, 50)
    deliver(buf, 2)
    with pytest.raises(ValueError, match="only 2"):
        buf.forget(3)
    with pytest.raises(ValueError, match=">= 0"):
        buf.forget(-1)
    assert buf.unconsumed == 2


def test_revoked_clamps_at_zero() -> None:
    buf = make(10, 50)
    buf.initial_credit()
    buf.revoked(3)
    assert buf.outstanding == 7
    buf.revoked(30)
    assert buf.outstanding == 0
    with pytest.raises(ValueError, match=">= 0"):
        buf.revoked(-1)


def test_push_front_redelivers_locally_in_order() -> None:
    buf = make(10, 50)
    deliver(buf, 5)
    taken = [buf.pop(), buf.pop(), buf.pop()]
    assert taken == [0, 1, 2]
    buf.push_front(taken)
    assert (buf.buffered, buf.unconsumed, buf.delivered_total) == (5, 5, 5)
    assert [buf.pop() for _ in range(5)] == [0, 1, 2, 3, 4]
    buf.push_front(())
    assert len(buf) == 0


def test_ring_growth_keeps_fifo_order() -> None:
    # Interleave pushes, pops and push_fronts well past the initial capacity.
    buf = make(3, 50)
    expected: list[int] = []
    nxt = 0
    for round_ in range(50):
        for _ in range(round_ % 7 + 1):
            buf.push(nxt)
            expected.append(nxt)
            nxt += 1
        for _ in range(round_ % 3):
            assert buf.pop() == expected.pop(0)
        if round_ % 5 == 0 and expected:
            head = [buf.pop() for _ in range(min(2, len(expected)))]
            buf.push_front(head)
    assert buf.drain() == expected


def test_granted_zero_is_not_a_batch() -> None:
    buf = make(10, 50)
    buf.granted(0)
    assert buf.batches == 0
    buf.granted(3)
    assert (buf.batches, buf.outstanding) == (1, 3)
    with pytest.raises(ValueError, match=">= 0"):
        buf.granted(-1)


# -- counters ----------------------------------------------------------------------------


def test_stats_and_properties_agree() -> None:
    buf = make(8, 25)
    buf.initial_credit()
    deliver(buf, 8)
    buf.pop()
    buf.consumed()
    assert buf.stats() == tuple(getattr(buf, name) for name in STATS_FIELDS)
    assert buf.stats() == (8, 25, 7, 7, 0, 8, 1, 1, 1)
    assert len(buf) == 7
    with pytest.raises(AttributeError):
        buf.limit = 5  # type: ignore[misc]
    assert "limit=8" in repr(buf)


# -- invalid arguments -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "threshold", "match"),
    [
        (-1, 50, "flow limit"),
        (2**31, 50, "flow limit"),
        (10, -1, "threshold"),
        (10, 101, "threshold"),
    ],
)
def test_invalid_construction(limit: int, threshold: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PrefetchBuffer(limit, threshold)


@pytest.mark.parametrize(("limit", "threshold"), [(1.5, 50), (10, "50"), (None, 50)])
def test_non_integer_construction(limit: object, threshold: object) -> None:
    with pytest.raises(TypeError):
        PrefetchBuffer(limit, threshold)


def test_boundary_construction() -> None:
    assert make(0, 0).stats()[:2] == (0, 0)
    assert make(2**31 - 1, 100).limit == 2**31 - 1


def test_consumed_more_than_unconsumed() -> None:
    buf = make(10, 50)
    deliver(buf, 2)
    with pytest.raises(ValueError, match=r"consumed\(3\) but only 2"):
        buf.consumed(3)
    with pytest.raises(ValueError, match=">= 0"):
        buf.consumed(-1)
    assert (buf.unconsumed, buf.consumed_total) == (2, 0)
    with pytest.raises(OverflowError):
        buf.consumed(2**64)


def test_initial_credit_only_once() -> None:
    buf = make(10, 50)
    buf.initial_credit()
    with pytest.raises(RuntimeError, match="already"):
        buf.initial_credit()


def test_none_cannot_be_buffered() -> None:
    buf = make(10, 50)
    with pytest.raises(ValueError, match="None"):
        buf.push(None)
    with pytest.raises(ValueError, match="None"):
        buf.push_front([1, None])
    assert buf.stats() == make(10, 50).stats()
