"""``jmspy-max-messages`` on SUBSCRIBE, in memory: the subscription is sent at most that
many messages in all, whatever its window and however fast it acknowledges; the rest stay
on the queue for other consumers."""

from __future__ import annotations

import pytest
from stomp_pair import StompPair

from jmspy.stomp_frames import Frame, header_dict

INDIVIDUAL = "client-individual"


def bodies(frames: list[Frame]) -> list[str]:
    return [f.body.decode() for f in frames if f.command == "MESSAGE"]


def _filled(n: int) -> StompPair:
    pair = StompPair()
    pair.client().send("/queue/q", *[f"m{i}" for i in range(n)])
    return pair


def test_a_window_refilled_by_acks_stops_at_the_subscriptions_maximum() -> None:
    pair = _filled(10)
    reader = pair.client()
    got = reader.subscribe("/queue/q", "s", ack=INDIVIDUAL, **{
        "jmspy-flow-limit": "2", "jmspy-flow-threshold": "0", "jmspy-max-messages": "3"})
    assert bodies(got) == ["m0", "m1"]
    first, second = reader.messages
    assert reader.ack(first) == []  # threshold 0: no refill while one is unconsumed
    assert bodies(reader.ack(second)) == ["m2"]  # the refill, cut to what is left of 3
    assert reader.ack(reader.messages[-1]) == []  # the maximum is spent: nothing more
    assert pair.broker.stats("q").message_count == 7
    other = pair.client()
    assert bodies(other.subscribe("/queue/q", "s2", ack=INDIVIDUAL))[:1] == ["m3"]


def test_an_auto_ack_subscription_gets_its_maximum_and_no_more() -> None:
    pair = _filled(10)
    reader = pair.client()
    assert bodies(reader.subscribe("/queue/q", "s", **{"jmspy-max-messages": "4"})) == [
        "m0", "m1", "m2", "m3"]
    assert bodies(pair.pump()) == []
    assert pair.broker.stats("q").message_count == 6


@pytest.mark.parametrize("value", ["0", "-1", "x", ""])
def test_a_bad_maximum_is_refused_naming_the_header(value: str) -> None:
    pair = _filled(1)
    answer = pair.client().frame("SUBSCRIBE", {"destination": "/queue/q", "id": "s",
                                               "jmspy-max-messages": value})
    errors = [f for f in answer if f.command == "ERROR"]
    assert errors and "jmspy-max-messages" in header_dict(errors[0].headers)["message"]
    assert pair.broker.stats("q").message_count == 1
