"""The connection flow limit's sharing rule (jmspy.flow_cap), which the client's
ConnectionFlow and the bundled broker's STOMP session both apply."""

from __future__ import annotations

import pytest

from jmspy.flow_cap import FlowCap, Share


def test_free_capacity_goes_to_the_asker_up_to_what_its_window_wants() -> None:
    cap: FlowCap[str] = FlowCap(10)
    assert cap.share(0, "a", {"a": 4}.__getitem__) == [Share("a", 4, 4)]
    assert cap.starved == []


def test_a_consumer_cut_short_is_starved_and_fed_first_next_time_oldest_first() -> None:
    cap: FlowCap[str] = FlowCap(3)
    wants = {"a": 10, "b": 10, "c": 10}
    assert cap.share(0, "a", wants.__getitem__) == [Share("a", 10, 3)]
    assert cap.share(3, "b", wants.__getitem__) == [Share("a", 10, 0), Share("b", 10, 0)]
    assert cap.share(3, "c", wants.__getitem__) == [
        Share("a", 10, 0), Share("b", 10, 0), Share("c", 10, 0)]
    assert cap.starved == ["a", "b", "c"]
    # c consumed two: a waited longest and takes both freed slots, b is next in line
    assert cap.share(1, "c", wants.__getitem__) == [
        Share("a", 10, 2), Share("b", 10, 0), Share("c", 10, 0)]
    wants["a"] = 0  # a's window is full now: the next slot is b's
    assert cap.share(2, "c", wants.__getitem__) == [Share("b", 10, 1), Share("c", 10, 0)]
    assert cap.starved == ["b", "c"]


def test_a_consumer_that_wants_nothing_or_is_forgotten_leaves_the_starved_list() -> None:
    cap: FlowCap[str] = FlowCap(1)
    cap.share(1, "a", {"a": 5}.__getitem__)
    cap.share(1, "b", {"a": 5, "b": 5}.__getitem__)
    assert cap.starved == ["a", "b"]
    cap.forget("a")
    assert cap.share(0, None, {"b": 0}.__getitem__) == []
    assert cap.starved == []


def test_a_connection_flow_limit_below_1_is_refused() -> None:
    with pytest.raises(ValueError, match="connection flow limit must be >= 1, got 0"):
        FlowCap(0)
