"""NACK batches on the bundled broker (protocols/stomp/settling.py), in memory: NACKs
marked ``jmspy-nack-more:true`` are held until the batch's last NACK, then returned in one
step, so the queue gets its order back and the window refills once."""

from __future__ import annotations

import pytest
from stomp_pair import StompClient, StompPair

from jmspy.stomp_frames import Frame, header_dict

INDIVIDUAL = "client-individual"
MORE = {"jmspy-nack-more": "true"}


def bodies(frames: list[Frame]) -> list[str]:
    return [f.body.decode() for f in frames if f.command == "MESSAGE"]


def _four_held(limit: int = 5) -> tuple[StompPair, StompClient]:
    pair = StompPair()
    consumer = pair.client()
    pair.client().send("/queue/q", "t0", "t1", "t2", "t3")
    got = consumer.subscribe("/queue/q", "s", ack=INDIVIDUAL,
                             **{"jmspy-flow-limit": str(limit), "jmspy-flow-threshold": "40"})
    assert bodies(got) == ["t0", "t1", "t2", "t3"][:limit]
    return pair, consumer


@pytest.mark.parametrize("order", ["oldest first", "newest first"])
def test_a_batch_comes_back_in_queue_order_whatever_order_its_nacks_came_in(
        order: str) -> None:
    _, consumer = _four_held()
    messages = list(consumer.messages)
    if order == "newest first":
        messages.reverse()
    for message in messages[:-1]:
        assert consumer.nack(message, **MORE) == []  # held: nothing comes back yet
    again = consumer.nack(messages[-1])
    assert bodies(again) == ["t0", "t1", "t2", "t3"]
    assert all(header_dict(m.headers).get("redelivered") == "true"
               for m in again if m.command == "MESSAGE")


def test_unbatched_nacks_of_a_small_window_come_back_one_by_one() -> None:
    """Without the header each NACK acts at once (what peers' clients rely on)."""
    _, consumer = _four_held(limit=1)
    (first,) = consumer.messages
    assert bodies(consumer.nack(first)) == ["t0"]


def test_another_frame_ends_an_open_batch_first() -> None:
    _, consumer = _four_held()
    t0, t1, t2, _t3 = consumer.messages
    assert consumer.nack(t1, **MORE) == []
    assert consumer.nack(t2, **MORE) == []
    # an ACK of t0: the held t1 and t2 go back (in order) before the ACK is acted on
    assert bodies(consumer.ack(t0)) == ["t1", "t2"]


def test_a_dropped_connection_returns_what_a_batch_held() -> None:
    pair, consumer = _four_held()
    for message in consumer.messages[:2]:
        consumer.nack(message, **MORE)
    consumer.session.connection_lost()
    other = pair.client()
    assert bodies(other.subscribe("/queue/q", "s2", ack=INDIVIDUAL)) == [
        "t0", "t1", "t2", "t3"]
