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


UNSEEN = {"jmspy-unseen": "true"}


def test_an_unseen_nack_comes_back_unmarked_with_its_count_unraised() -> None:
    """A client hands back what it only prefetched: the broker returns it as if never
    sent (Open MQ's redeliver of undelivered messages), not ``redelivered:true``."""
    _, consumer = _four_held(limit=1)
    (first,) = consumer.messages
    (again,) = [m for m in consumer.nack(first, **UNSEEN) if m.command == "MESSAGE"]
    headers = header_dict(again.headers)
    assert again.body == b"t0"
    assert headers.get("redelivered") != "true"


def test_a_batch_of_seen_and_unseen_nacks_keeps_its_order_and_marks_only_the_seen() -> None:
    _, consumer = _four_held()
    t0, t1, t2, t3 = consumer.messages
    assert consumer.nack(t0, **MORE) == []
    assert consumer.nack(t1, **MORE) == []
    assert consumer.nack(t2, **MORE, **UNSEEN) == []
    again = [m for m in consumer.nack(t3, **UNSEEN) if m.command == "MESSAGE"]
    assert bodies(again) == ["t0", "t1", "t2", "t3"]
    assert [header_dict(m.headers).get("redelivered") == "true" for m in again] == [
        True, True, False, False]


def test_an_unseen_nack_of_a_message_seen_before_keeps_its_earlier_mark() -> None:
    """Unseen lowers nothing: a message already delivered twice still says so."""
    _, consumer = _four_held(limit=1)
    (first,) = consumer.messages
    (marked,) = [m for m in consumer.nack(first) if m.command == "MESSAGE"]
    (again,) = [m for m in consumer.nack(marked, **UNSEEN) if m.command == "MESSAGE"]
    assert header_dict(again.headers).get("redelivered") == "true"


def _redelivered(frames: list[Frame]) -> list[tuple[str, bool]]:
    return [(f.body.decode(), header_dict(f.headers).get("redelivered") == "true")
            for f in frames if f.command == "MESSAGE"]


def test_an_unsubscribe_marks_only_what_its_client_saw_through() -> None:
    """``jmspy-seen-through`` names the last delivery the application was given: the
    later ones (prefetched, or on the wire) go back unmarked, in one step, in order."""
    pair, consumer = _four_held()
    t1 = consumer.messages[1]
    seen = header_dict(t1.headers)["ack"]
    assert consumer.frame("UNSUBSCRIBE", {"id": "s", "jmspy-seen-through": seen}) == []
    other = pair.client()
    again = other.subscribe("/queue/q", "s2", ack=INDIVIDUAL)
    assert _redelivered(again) == [("t0", True), ("t1", True), ("t2", False), ("t3", False)]


def test_an_unsubscribe_without_the_header_marks_every_unacked_delivery() -> None:
    pair, consumer = _four_held()
    assert consumer.frame("UNSUBSCRIBE", {"id": "s"}) == []
    again = pair.client().subscribe("/queue/q", "s2", ack=INDIVIDUAL)
    assert all(marked for _, marked in _redelivered(again))


def test_an_unsubscribe_with_a_bad_seen_through_is_refused_and_loses_nothing() -> None:
    pair, consumer = _four_held()
    answer = consumer.frame("UNSUBSCRIBE", {"id": "s", "jmspy-seen-through": "t2",
                                            "receipt": "r"})
    errors = [f for f in answer if f.command == "ERROR"]
    assert errors and "jmspy-seen-through" in header_dict(errors[0].headers)["message"]
    stats = pair.broker.stats("q")  # the ERROR ended the session: all four are back
    assert (stats.message_count, stats.delivering_count) == (4, 0)
