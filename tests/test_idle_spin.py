"""The adaptive poll-before-sleep rule (jmspy/idle_spin.py), driven directly: no socket,
no loop, no clock. Each test names what a reader about to wait is told to do."""

from __future__ import annotations

import pytest

from jmspy.idle_spin import DEFAULT_IDLE_SPIN_US, MAX_IDLE_SPIN_US, MAX_SKIP, IdleSpin


def _windows(spin: IdleSpin, waits: int) -> list[float]:
    """What ``waits`` waits in a row are told, each window ending without input."""
    told = []
    for _ in range(waits):
        window = spin.window()
        told.append(window)
        if window:
            spin.miss()
    return told


def test_a_new_reader_polls_for_the_whole_window_and_keeps_doing_so_while_it_hits() -> None:
    spin = IdleSpin(100)
    for _ in range(10):
        assert spin.window() == pytest.approx(100e-6)
        spin.hit()
    assert (spin.hits, spin.misses) == (10, 0)


def test_misses_in_a_row_double_the_waits_slept_through_up_to_the_cap() -> None:
    spin = IdleSpin(100)
    told = _windows(spin, 1 + 1 + 1 + 2 + 1 + 4 + 1 + 8)
    polled = [bool(w) for w in told]
    assert polled == [True, False, True, False, False, True] + [False] * 4 + [True] + [False] * 8
    for _ in range(20):  # many more misses: the skip stops growing at MAX_SKIP
        spin.window()
        spin.miss()
    skipped = 0
    while not spin.window():
        skipped += 1
    assert skipped == MAX_SKIP


def test_a_hit_halves_what_the_next_miss_skips() -> None:
    spin = IdleSpin(100)
    _windows(spin, 1 + 1 + 1 + 2 + 1 + 4 + 1)  # three misses: the next one skips 8
    assert spin.misses == 4
    spin.hit()  # in a window that found input...
    spin.hit()  # ...twice: 8 -> 4 -> 2
    spin.miss()  # the next miss doubles 2: four waits sleep at once
    assert [bool(spin.window()) for _ in range(5)] == [False] * 4 + [True]


def test_a_contended_window_sleeps_through_the_next_waits_as_a_miss_would() -> None:
    """A yield that gave the CPU away ends the window: counted on its own, and in a row
    with misses it doubles the waits slept through just as a miss does."""
    spin = IdleSpin(100)
    assert spin.window()
    spin.contended()  # skip 1
    assert [bool(spin.window()) for _ in range(2)] == [False, True]
    spin.miss()  # skip 2
    assert [bool(spin.window()) for _ in range(3)] == [False, False, True]
    spin.contended()  # skip 4
    assert [bool(spin.window()) for _ in range(5)] == [False] * 4 + [True]
    spin.hit()  # 4 -> 2; the next contended window doubles it: 4 waits
    spin.contended()
    assert [bool(spin.window()) for _ in range(5)] == [False] * 4 + [True]
    assert (spin.hits, spin.misses, spin.contentions) == (1, 1, 3)


def test_a_window_of_zero_never_polls() -> None:
    spin = IdleSpin(0)
    assert not spin.enabled
    for _ in range(5):
        assert spin.window() == 0.0
        spin.hit()
    assert IdleSpin().window_s == pytest.approx(DEFAULT_IDLE_SPIN_US / 1e6)


@pytest.mark.parametrize("bad", [-1, MAX_IDLE_SPIN_US + 1, 2.5, True, "100", None])
def test_a_window_out_of_range_or_not_whole_microseconds_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match=rf"from 0 \(off\) to {MAX_IDLE_SPIN_US}"):
        IdleSpin(bad)  # type: ignore[arg-type]
