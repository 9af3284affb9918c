"""The bundled broker's STOMP flow windows beyond one subscription's message count, in
memory (stomp_pair.py), so every count below is exact and "nothing more came" is a fact:

* ``jmspy-connection-flow-limit`` on CONNECT: Open MQ's imqConnectionFlowLimit enforced
  by the broker over all of a connection's client-acknowledged subscriptions as a gate on
  the connection (a subscription kept waiting is fed first; one with nothing to deliver
  holds nothing back);
* ``consumer-window-size`` on SUBSCRIBE: Artemis's byte window.
"""

from __future__ import annotations

import pytest
from stomp_pair import StompClient, StompPair

from jmspy import twins
from jmspy.broker_ref.protocols.stomp.protocol import StompSession
from jmspy.stomp_frames import Frame, header_dict

_codec = twins.stomp_codec
INDIVIDUAL = "client-individual"


def bodies(frames: list[Frame]) -> list[str]:
    return [f.body.decode() for f in frames if f.command == "MESSAGE"]


def unacked(client: StompClient, acked: set[str]) -> list[Frame]:
    return [m for m in client.messages if header_dict(m.headers)["ack"] not in acked]


# -- the connection flow limit ------------------------------------------------------------
def two_starved_subscriptions(limit: int = 3) -> tuple[StompPair, StompClient, StompClient]:
    """A consumer with two client-individual subscriptions (each window 10) under a
    connection limit, and a producer that queued 4 messages for each."""
    pair = StompPair()
    consumer = pair.client(**{"jmspy-connection-flow-limit": str(limit)})
    producer = pair.client()
    for q in ("qa", "qb"):
        producer.send(f"/queue/{q}", *(f"{q}{i}" for i in range(4)))
    return pair, consumer, producer


def test_connected_echoes_the_connection_flow_limit_it_enforces() -> None:
    pair = StompPair()
    assert pair.client(**{"jmspy-connection-flow-limit": "7"}).connected[
        "jmspy-connection-flow-limit"] == "7"
    assert "jmspy-connection-flow-limit" not in pair.client().connected


def test_connection_flow_limit_caps_two_subscriptions_together_and_feeds_the_starved_first(
) -> None:
    _, c, _ = two_starved_subscriptions(limit=3)
    window = {"jmspy-flow-limit": "10"}
    # qa subscribes first: its window wants 10, the connection has 3
    assert bodies(c.subscribe("/queue/qa", "a", ack=INDIVIDUAL, **window)) == ["qa0", "qa1",
                                                                               "qa2"]
    # qb's window wants 10 too, and the connection is full: nothing
    assert bodies(c.subscribe("/queue/qb", "b", ack=INDIVIDUAL, **window)) == []
    # one slot frees: qb waited longest and gets it, not qa that consumed
    assert bodies(c.ack(c.messages[0])) == ["qb0"]
    # the next slot goes to qa, now the one that waited
    assert bodies(c.ack(c.messages[3])) == ["qa3"]


def test_connection_flow_limit_never_exceeded_and_every_message_arrives() -> None:
    _, c, _ = two_starved_subscriptions(limit=3)
    c.subscribe("/queue/qa", "a", ack=INDIVIDUAL, **{"jmspy-flow-limit": "10"})
    c.subscribe("/queue/qb", "b", ack=INDIVIDUAL, **{"jmspy-flow-limit": "10"})
    acked: set[str] = set()
    while pending := unacked(c, acked):
        assert len(pending) <= 3
        acked.add(header_dict(pending[0].headers)["ack"])
        c.ack(pending[0])
    assert sorted(c.bodies()) == [f"{q}{i}" for q in ("qa", "qb") for i in range(4)]


def test_a_subscription_with_nothing_to_deliver_holds_no_capacity_back() -> None:
    pair = StompPair()
    c = pair.client(**{"jmspy-connection-flow-limit": "3"})
    window = {"jmspy-flow-limit": "10"}
    assert bodies(c.subscribe("/queue/idle", "a", ack=INDIVIDUAL, **window)) == []
    assert bodies(c.subscribe("/queue/busy", "b", ack=INDIVIDUAL, **window)) == []
    pair.client().send("/queue/busy", "b0", "b1", "b2", "b3")
    assert c.bodies() == ["b0", "b1", "b2"]  # all the connection's room, none kept for a


def test_auto_subscriptions_pass_the_connection_limit_once_written() -> None:
    pair = StompPair()
    c = pair.client(**{"jmspy-connection-flow-limit": "2"})
    pair.client().send("/queue/auto", *(f"m{i}" for i in range(6)))
    assert len(bodies(c.subscribe("/queue/auto", "s", ack="auto"))) == 6


def test_without_a_connection_flow_limit_each_subscription_has_its_own_window() -> None:
    pair = StompPair()
    c, producer = pair.client(), pair.client()
    for q in ("qa", "qb"):
        producer.send(f"/queue/{q}", *(f"{q}{i}" for i in range(4)))
    assert len(c.subscribe("/queue/qa", "a", ack=INDIVIDUAL, **{"jmspy-flow-limit": "3"})) == 3
    assert len(c.subscribe("/queue/qb", "b", ack=INDIVIDUAL, **{"jmspy-flow-limit": "3"})) == 3


def test_closing_a_subscription_frees_its_share_for_the_starved_one() -> None:
    _, c, _ = two_starved_subscriptions(limit=3)
    c.subscribe("/queue/qa", "a", ack=INDIVIDUAL, **{"jmspy-flow-limit": "10"})
    assert bodies(c.subscribe("/queue/qb", "b", ack=INDIVIDUAL,
                              **{"jmspy-flow-limit": "10"})) == []
    # qa's three unacked messages go back to qa; qb takes the three freed slots
    assert bodies(c.frame("UNSUBSCRIBE", {"id": "a"})) == ["qb0", "qb1", "qb2"]


def test_transacted_acks_free_connection_capacity_only_at_commit() -> None:
    pair = StompPair()
    c = pair.client(**{"jmspy-connection-flow-limit": "2"})
    pair.client().send("/queue/q", *"ABCD")
    assert bodies(c.subscribe("/queue/q", "s", ack=INDIVIDUAL)) == ["A", "B"]
    c.frame("BEGIN", {"transaction": "t"})
    for m in list(c.messages):
        assert c.ack(m, transaction="t") == []  # consumed only when committed
    assert bodies(c.frame("COMMIT", {"transaction": "t"})) == ["C", "D"]


def test_auto_ack_subscriptions_are_outside_the_connection_cap() -> None:
    pair = StompPair()
    c = pair.client(**{"jmspy-connection-flow-limit": "1"})
    pair.client().send("/queue/q", *"ABCDE")
    assert bodies(c.subscribe("/queue/q", "s")) == list("ABCDE")


@pytest.mark.parametrize("value", ["many", "-1", "2147483648"])
def test_a_bad_connection_flow_limit_is_an_error_frame_naming_the_header(value: str) -> None:
    session = StompSession(StompPair().broker)
    session.receive_data(_codec.encode_frame(Frame("CONNECT", [
        ("accept-version", "1.2"), ("host", "/"), ("jmspy-connection-flow-limit", value)]),
        "1.2"))
    parser = _codec.FrameParser("1.2", None, False)
    parser.feed(session.data_to_send())
    error = parser.next_frame()
    assert error.command == "ERROR"
    assert "jmspy-connection-flow-limit" in header_dict(error.headers)["message"]
    assert session.closing


# -- Artemis's consumer-window-size (bytes) ------------------------------------------------
def held_bytes(c: StompClient, acked: set[str]) -> list[int]:
    return [c.sizes[header_dict(m.headers)["message-id"]] for m in unacked(c, acked)]


def assert_window(sizes: list[int], window: int, queue_left: int) -> None:
    """Artemis's rule: a message goes out while fewer than ``window`` bytes are unacked,
    so the window is overshot by at most the last message, and it is full unless the
    queue ran dry."""
    assert sum(sizes[:-1]) < window
    assert sum(sizes) >= window or queue_left == 0


@pytest.mark.parametrize("window", [1, 300, 1000, 2500])
def test_consumer_window_size_bounds_unacked_bytes_as_artemis_does(window: int) -> None:
    pair = StompPair()
    c = pair.client()
    pair.client().send("/queue/q", *(f"{i:02d}" + "x" * (40 * i) for i in range(20)))
    c.subscribe("/queue/q", "s", ack=INDIVIDUAL, **{"consumer-window-size": str(window)})
    acked: set[str] = set()
    while pending := unacked(c, acked):
        assert_window(held_bytes(c, acked), window, queue_left=20 - len(c.messages))
        acked.add(header_dict(pending[0].headers)["ack"])
        c.ack(pending[0])
    assert [b[:2] for b in c.bodies()] == [f"{i:02d}" for i in range(20)]


def test_consumer_window_size_lets_a_message_larger_than_the_window_through_alone() -> None:
    pair = StompPair()
    c = pair.client()
    pair.client().send("/queue/q", "A" * 5000, "B" * 5000)
    assert bodies(c.subscribe("/queue/q", "s", ack=INDIVIDUAL,
                              **{"consumer-window-size": "1024"})) == ["A" * 5000]
    assert bodies(c.ack(c.messages[0])) == ["B" * 5000]


def test_consumer_window_size_0_is_one_message_at_a_time_and_minus_1_no_window() -> None:
    pair = StompPair()
    c = pair.client()
    pair.client().send("/queue/one", *"ABC")
    pair.client().send("/queue/all", *"ABC")
    assert bodies(c.subscribe("/queue/one", "one", ack=INDIVIDUAL,
                              **{"consumer-window-size": "0"})) == ["A"]
    assert bodies(c.ack(c.messages[0])) == ["B"]
    assert bodies(c.subscribe("/queue/all", "all", ack=INDIVIDUAL,
                              **{"consumer-window-size": "-1"})) == list("ABC")


def test_consumer_window_size_bytes_come_back_on_nack_and_on_cumulative_client_ack() -> None:
    pair = StompPair()
    c = pair.client()
    pair.client().send("/queue/q", *("m" * 200 for _ in range(6)))
    c.subscribe("/queue/q", "s", ack="client", **{"consumer-window-size": "400"})
    assert len(c.messages) == 2  # 200-byte bodies: two frames pass 400 bytes
    c.ack(c.messages[1])  # cumulative: both bytes come back, two more go out
    assert len(c.messages) == 4
    c.nack(c.messages[3])  # redelivered, and its bytes are free again
    assert len(c.messages) == 6


def test_a_message_count_header_wins_over_consumer_window_size() -> None:
    pair = StompPair()
    c = pair.client()
    pair.client().send("/queue/q", *"ABCDE")
    assert bodies(c.subscribe("/queue/q", "s", ack=INDIVIDUAL, **{
        "consumer-window-size": "1", "jmspy-flow-limit": "3"})) == list("ABC")


@pytest.mark.parametrize("value", ["-2", "lots"])
def test_a_bad_consumer_window_size_is_an_error_frame_naming_the_header(value: str) -> None:
    pair = StompPair()
    c = pair.client()
    (error,) = c.subscribe("/queue/q", "s", ack=INDIVIDUAL, **{"consumer-window-size": value})
    assert error.command == "ERROR"
    assert "consumer-window-size" in header_dict(error.headers)["message"]


# -- waking the host ------------------------------------------------------------------------
def test_a_clients_own_ack_refills_its_window_without_waking_the_host() -> None:
    """``wakeup`` asks the host for a flush it would not otherwise make: output caused by
    another client's frame. A delivery caused by the client's own ACK is written by the
    flush the host makes after every ``receive_data``, so it must not ask for a second."""
    pair = StompPair()
    consumer, producer = pair.client(), pair.client()
    woken = {"consumer": 0, "producer": 0}
    consumer.session.wakeup = lambda: woken.__setitem__("consumer", woken["consumer"] + 1)
    producer.session.wakeup = lambda: woken.__setitem__("producer", woken["producer"] + 1)
    consumer.subscribe("/queue/q", "s", INDIVIDUAL, **{"activemq.prefetchSize": "1"})

    assert bodies(producer.send("/queue/q", "a", "b", receipt="r")) == ["a"]
    assert woken == {"consumer": 1, "producer": 0}  # "a" came from the producer's SEND

    assert bodies(consumer.ack(consumer.messages[0])) == ["b"]  # written all the same
    assert woken == {"consumer": 1, "producer": 0}
