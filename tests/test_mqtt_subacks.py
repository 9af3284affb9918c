"""The mqtt:// transport's SUBACK/UNSUBACK hand-over (transports/mqtt/subacks.py)."""

from __future__ import annotations

from jmspy.transports.mqtt.subacks import KEPT, Subacks


def test_a_suback_that_came_before_its_waiter_asked_is_kept_for_it() -> None:
    acks = Subacks()
    acks.on_suback(None, None, 7, [1], None)
    assert acks.wait(0, 7, 0.0) == [1]
    assert acks.wait(0, 7, 0.0) is None  # handed over once


def test_answers_nobody_asks_for_do_not_pile_up() -> None:
    """Closing a consumer sends an UNSUBSCRIBE whose UNSUBACK nobody waits for: a
    connection that opens and closes consumers for ever keeps at most KEPT of them."""
    acks = Subacks()
    for mid in range(1, 3 * KEPT):
        acks.on_suback(None, None, mid, [], None)
    acks.on_suback(None, None, 999_999, [0], None)  # a SUBACK whose waiter comes now
    assert acks.wait(0, 999_999, 0.0) == [0]
    assert acks.wait(0, 3 * KEPT - 1, 0.0) == []  # recent ones are still there
    assert acks.wait(0, 1, 0.0) is None  # the oldest unclaimed ones went
    assert acks.wait(0, 2 * KEPT - 1, 0.0) is None  # no more than KEPT are kept
