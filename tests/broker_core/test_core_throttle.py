"""Failed-login throttling (issue 11, item 5), on a fake clock: per address and per user
name, answer at once, then delay, then refuse unchecked; old failures leave the window; a
success clears the user's count only; made-up names cannot grow it without bound."""

from __future__ import annotations

import logging

import pytest
from core_support import FakeClock

from jmspy.broker_ref.core import throttle as throttle_module
from jmspy.broker_ref.core.throttle import LoginThrottle, ThrottleSettings, Verdict

SETTINGS = ThrottleSettings(window_ms=60_000, delay_after=3, delay_ms=1_000, refuse_after=5)


def fresh() -> tuple[LoginThrottle, FakeClock]:
    clock = FakeClock()
    return LoginThrottle(SETTINGS, clock), clock


def test_failures_bring_a_delay_then_a_refusal_for_that_user(
    caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "jmspy.broker_ref.security")
    t, clock = fresh()
    verdicts = []
    for _ in range(6):
        verdicts.append(t.verdict("10.0.0.1", "alice"))
        t.failed("10.0.0.1", "alice")
        clock.advance(1_000)
    assert [v.delay_ms for v in verdicts[:5]] == [0, 0, 0, 1_000, 1_000]
    assert verdicts[5].refusal is not None
    assert "too many failed logins from 10.0.0.1: 5 in the last 60 s" in verdicts[5].refusal
    assert "try again in 55 s" in verdicts[5].refusal
    # another address guessing alice's password is refused too (the user's count)
    elsewhere = t.verdict("10.0.0.9", "alice").refusal
    assert elsewhere is not None and "for user 'alice': 6 in the last 60 s" in elsewhere
    # and alice's address is refused for another user (the address's count)
    assert t.verdict("10.0.0.1", "bob").refusal is not None
    assert t.verdict("10.0.0.9", "bob") == Verdict()
    logged = [r.getMessage() for r in caplog.records]
    assert any("failed logins for user 'alice'" in m and "delaying" in m for m in logged)
    assert any("failed logins from 10.0.0.1" in m and "refusing" in m for m in logged)


def test_failures_leave_the_window() -> None:
    t, clock = fresh()
    for _ in range(5):
        t.failed("10.0.0.1", "alice")
    assert t.verdict("10.0.0.1", "alice").refusal is not None
    clock.advance(59_999)
    assert t.verdict("10.0.0.1", "alice").refusal is not None
    clock.advance(1)
    assert t.verdict("10.0.0.1", "alice") == Verdict()


def test_success_clears_the_users_count_but_not_the_addresss() -> None:
    t, _ = fresh()
    for user in ("a", "b", "c", "alice"):
        t.failed("10.0.0.1", user)
    t.succeeded("10.0.0.1", "alice")
    assert t.verdict("10.0.0.2", "alice") == Verdict()
    assert t.verdict("10.0.0.1", "zed").delay_ms == 1_000  # 4 failures from that address


def test_made_up_user_names_do_not_grow_the_throttle_without_bound(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(throttle_module, "_MAX_KEYS", 100)
    t, _ = fresh()
    for i in range(1_000):
        t.failed(None, f"user-{i}")
    assert len(t._failures) == 100


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="delay_ms must be an int >= 0"):
        ThrottleSettings(delay_ms=-1)
