"""The adaptive poll-before-sleep rule (jmspy/idle_spin.py), driven directly: no socket,
no loop, no clock. Each test names what a reader about to wait is told to do."""

from __future__ import annotations

import pytest

from jmspy.idle_spin import DEFAULT_IDLE_SPIN_US, GROWTH, MAX_IDLE_SPIN_US, MAX_SKIP, IdleSpin


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


def _answered_after(spin: IdleSpin, answer_s: float, waits: int) -> list[int]:
    """``waits`` waits whose input comes ``answer_s`` after each starts: a hit if the
    window is that long, else a miss timed by ``waited``; the window size after each."""
    sizes = []
    for _ in range(waits):
        window = spin.window()
        if window >= answer_s:
            spin.hit()
        else:
            if window:
                spin.miss()
            spin.waited(answer_s)
        sizes.append(round(spin.window_s * 1e6))
    return sizes


def test_answers_just_after_the_window_double_it_up_to_four_times_the_configured() -> None:
    """KVM's halt-polling rule: a wait that missed, yet had its answer within GROWTH
    windows, would have been a hit with a longer window; from there on it is one."""
    spin = IdleSpin(100)
    assert GROWTH == 4
    assert _answered_after(spin, 250e-6, 5) == [200, 400, 400, 400, 400]
    assert (spin.misses, spin.hits, spin.grown) == (2, 3, 2)


def test_a_wait_past_the_limit_puts_the_window_back_to_the_configured_one() -> None:
    spin = IdleSpin(100)
    spin.window()
    spin.miss()
    spin.waited(300e-6)
    assert spin.window_s == pytest.approx(200e-6)
    spin.window()
    spin.miss()
    spin.waited(401e-6)  # a slow broker, or an idle spell: longer than 4 windows
    assert spin.window_s == pytest.approx(100e-6)
    assert spin.grown == 1


def test_growing_ends_the_waits_skipped_after_misses_so_the_longer_window_is_tried() -> None:
    spin = IdleSpin(100)
    _windows(spin, 1 + 1 + 1 + 2 + 1)  # three misses: the next four waits sleep at once
    assert spin.window() == 0.0  # one of them...
    spin.waited(250e-6)  # ...had its answer 250 us later: a 400 us window catches that
    assert spin.window() == pytest.approx(200e-6)
    spin.hit()


def test_a_slow_answer_after_a_skipped_wait_leaves_the_skipping_as_it_was() -> None:
    spin = IdleSpin(100)
    _windows(spin, 1 + 1 + 1)  # two misses: the next two waits sleep at once
    assert spin.window() == 0.0
    spin.waited(5e-3)
    assert [bool(spin.window()) for _ in range(2)] == [False, True]
    assert spin.window_s == pytest.approx(100e-6)


def test_settling_puts_a_grown_window_back_to_the_configured_one() -> None:
    spin = IdleSpin(100)
    _answered_after(spin, 250e-6, 2)  # grown to 400
    spin.settle()  # the reader no longer takes one message at a time
    assert spin.window_s == pytest.approx(100e-6)
    assert spin.window() == pytest.approx(100e-6)


def test_the_window_grows_to_the_longest_accepted_at_most() -> None:
    spin = IdleSpin(400)  # four times would be 1,600 us
    assert _answered_after(spin, 900e-6, 3) == [800, MAX_IDLE_SPIN_US, MAX_IDLE_SPIN_US]


def test_at_the_limit_a_miss_means_a_slower_broker_and_the_window_goes_back() -> None:
    spin = IdleSpin(100)
    _answered_after(spin, 250e-6, 2)  # grown to 400
    assert _answered_after(spin, 450e-6, 1) == [100]


def test_a_window_of_zero_never_polls() -> None:
    spin = IdleSpin(0)
    assert not spin.enabled
    for _ in range(5):
        assert spin.window() == 0.0
        spin.hit()
        spin.waited(1e-6)  # an answer however soon does not turn polling on
    assert spin.window_s == 0.0 and spin.grown == 0
    assert IdleSpin().window_s == pytest.approx(DEFAULT_IDLE_SPIN_US / 1e6)


@pytest.mark.parametrize("bad", [-1, MAX_IDLE_SPIN_US + 1, 2.5, True, "100", None])
def test_a_window_out_of_range_or_not_whole_microseconds_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match=rf"from 0 \(off\) to {MAX_IDLE_SPIN_US}"):
        IdleSpin(bad)  # type: ignore[arg-type]
