"""The broker-wide input budget, sans-I/O: bytes of partly read frames from several
connections add up; once the total is spent, holders other than the finisher are told to
pause; connections whose reads end on frame boundaries are never paused; paused ones are
released in order once frames complete or connections close; 0 means no budget."""

from __future__ import annotations

import pytest

from jmspy.broker_ref.core.input_budget import InputBudget
from jmspy.broker_ref.core.listener_stats import ListenerStats


def test_partial_frames_from_several_connections_spend_the_budget_then_pause_all_but_one(
) -> None:
    budget = InputBudget(1_000)
    assert budget.hold("a", 400) is False and budget.hold("b", 400) is False
    assert budget.used == 800 and budget.resumable() == []
    assert budget.hold("c", 300) is True  # spent: c holds part of a frame, a is the finisher
    assert budget.hold("b", 500) is True  # b grew: paused too (it read before being told)
    assert budget.hold("a", 700) is False  # the finisher reads on, past the budget
    assert (budget.used, budget.paused, budget.pauses) == (1_500, 2, 2)
    assert budget.hold("d", 0) is False  # a read that ended on a frame boundary: not paused
    assert budget.resumable() == []  # still spent


def test_paused_connections_resume_in_order_once_frames_complete() -> None:
    budget = InputBudget(1_000)
    budget.hold("a", 600)
    assert budget.hold("b", 500) and budget.hold("c", 100)
    assert budget.hold("a", 0) is False  # a's frame completed: its 600 bytes come back
    assert budget.used == 600
    assert budget.resumable() == ["b", "c"]
    assert budget.paused == 0 and budget.resumable() == []  # each released once
    # the next spending picks a new finisher: the largest holder
    assert budget.hold("c", 600) is False  # 1100 > 1000, and c (600) holds most: finisher
    assert budget.hold("b", 550) is True


def test_a_closed_connection_gives_its_bytes_back() -> None:
    budget = InputBudget(1_000)
    budget.hold("a", 900)
    assert budget.hold("b", 300) is True
    budget.forget("a")  # the finisher closed mid-frame
    assert budget.used == 300 and budget.held_by("a") == 0
    assert budget.resumable() == ["b"]
    budget.forget("b")
    assert budget.used == 0


def test_zero_means_no_budget_and_the_limit_is_checked() -> None:
    budget = InputBudget(0)
    assert budget.hold("a", 10**9) is False and budget.hold("b", 10**9) is False
    with pytest.raises(ValueError, match="input budget must be an int >= 0"):
        InputBudget(-1)


def test_usage_reports_the_budget_and_the_counters_by_reason() -> None:
    from jmspy.broker_ref.core.listener_stats import Closed, Refused

    stats = ListenerStats(2_000)
    stats.input.hold("a", 1_500)
    stats.input.hold("b", 1_000)
    stats.refuse(Refused.PER_ADDRESS)
    stats.refuse(Refused.PER_ADDRESS)
    stats.refuse(Refused.LOGIN_THROTTLED)
    stats.close(Closed.IDLE_TIMEOUT)
    usage = stats.as_usage()
    assert usage["connectionsRefused"] == 3
    assert usage["connectionsRefusedPerAddress"] == 2
    assert usage["connectionsRefusedLoginThrottled"] == 1
    assert usage["connectionsRefusedMaxConnections"] == 0
    assert usage["connectionsClosedIdle"] == 1
    assert (usage["inputBytes"], usage["inputBudget"], usage["inputPaused"],
            usage["inputPauses"]) == (2_500, 2_000, 1, 1)
