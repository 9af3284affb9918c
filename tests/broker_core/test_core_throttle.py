"""Failed-login throttling on a fake clock: the attacker is throttled, not the victim.
Wrong passwords count per (source address, user name): that pair is delayed, then refused
unchecked; the user's right password from another address and other users from the
attacker's address are answered at once; one address spraying many user names hits its
own, higher cap; old failures leave the window; made-up names cannot grow it without
bound."""

from __future__ import annotations

import logging

import pytest
from core_support import FakeClock

from jmspy.broker_ref.core import throttle as throttle_module
from jmspy.broker_ref.core.throttle import LoginThrottle, ThrottleSettings, Verdict

SETTINGS = ThrottleSettings(window_ms=60_000, delay_after=3, delay_ms=1_000, refuse_after=10,
                            address_refuse_after=30)
A, B = "10.0.0.1", "10.0.0.2"


def fresh() -> tuple[LoginThrottle, FakeClock]:
    clock = FakeClock()
    return LoginThrottle(SETTINGS, clock), clock


def test_ten_wrong_passwords_from_one_address_throttle_that_address_not_the_user(
    caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "jmspy.broker.security")
    t, clock = fresh()
    verdicts = []
    for _ in range(10):
        verdicts.append(t.verdict(A, "alice"))
        t.failed(A, "alice")
        clock.advance(1_000)
    assert [v.delay_ms for v in verdicts] == [0, 0, 0] + [1_000] * 7
    assert all(v.refusal is None for v in verdicts)
    # alice's right password from B: checked at once, no delay
    assert t.verdict(B, "alice") == Verdict()
    # bob from the attacker's address: checked at once too
    assert t.verdict(A, "bob") == Verdict()
    # alice from A is refused unchecked, saying when to retry
    refusal = t.verdict(A, "alice").refusal
    assert refusal is not None
    assert "too many failed logins for user 'alice' from 10.0.0.1: 10 in the last 60 s" \
        in refusal
    assert "[limits] login-refuse-after = 10" in refusal and "try again in 50 s" in refusal
    assert t.refused == 1
    logged = [r.getMessage() for r in caplog.records]
    assert any("for user 'alice' from 10.0.0.1" in m and "delaying" in m for m in logged)
    assert any("for user 'alice' from 10.0.0.1" in m and "refusing" in m for m in logged)


def test_an_address_spraying_many_user_names_hits_the_per_address_cap(
    caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "jmspy.broker.security")
    t, _ = fresh()
    for i in range(29):  # two wrong passwords per user: no pair is even delayed
        user = f"user-{i // 2}"
        assert t.verdict(A, user) == Verdict()
        t.failed(A, user)
    assert t.verdict(A, "somebody-new") == Verdict()  # 29 < 30 across user names
    t.failed(A, "user-14")
    refusal = t.verdict(A, "somebody-new").refusal
    assert refusal is not None
    assert "too many failed logins from 10.0.0.1: 30 across user names" in refusal
    assert "[limits] login-address-refuse-after = 30" in refusal
    assert t.verdict(B, "somebody-new") == Verdict()  # other addresses are not touched
    assert t.verdict(B, "user-0") == Verdict()
    assert any("30 failed logins from 10.0.0.1 across user names" in r.getMessage()
               for r in caplog.records)


def test_the_throttle_expires_by_the_clock() -> None:
    t, clock = fresh()
    for _ in range(10):
        t.failed(A, "alice")
    assert t.verdict(A, "alice").refusal is not None
    clock.advance(59_999)
    assert t.verdict(A, "alice").refusal is not None
    clock.advance(1)
    assert t.verdict(A, "alice") == Verdict()
    for i in range(30):
        t.failed(A, f"u{i}")
    assert t.verdict(A, "bob").refusal is not None
    clock.advance(60_000)
    assert t.verdict(A, "bob") == Verdict()


def test_success_clears_that_pair_but_not_the_addresss_count() -> None:
    t, _ = fresh()
    for _ in range(4):
        t.failed(A, "alice")
    t.failed(B, "alice")
    assert t.verdict(A, "alice").delay_ms == 1_000
    t.succeeded(B, "alice")  # a success elsewhere does not clear A's guesses
    assert t.verdict(A, "alice").delay_ms == 1_000
    t.succeeded(A, "alice")
    assert t.verdict(A, "alice") == Verdict()
    for i in range(25):
        t.failed(A, f"u{i}")
    t.succeeded(A, "mallory")  # 4 + 25 + 1 = 30 failures from A still count
    t.failed(A, "zed")
    assert t.verdict(A, "mallory").refusal is not None


def test_zero_turns_refusals_off() -> None:
    t = LoginThrottle(ThrottleSettings(delay_after=3, refuse_after=0, address_refuse_after=0),
                      FakeClock())
    for _ in range(100):
        t.failed(A, "alice")
    assert t.verdict(A, "alice") == Verdict(delay_ms=1_000)


def test_made_up_user_names_do_not_grow_the_throttle_without_bound(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(throttle_module, "_MAX_KEYS", 100)
    t, _ = fresh()
    for i in range(1_000):
        t.failed(f"10.1.{i // 250}.{i % 250}", f"user-{i}")
    assert len(t._pairs) == 100 and len(t._addresses) == 100


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="delay_ms must be an int >= 0"):
        ThrottleSettings(delay_ms=-1)
    with pytest.raises(ValueError, match="address_refuse_after must be an int >= 0"):
        ThrottleSettings(address_refuse_after=-1)
