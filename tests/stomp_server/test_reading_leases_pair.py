"""Reading leases over STOMP, in memory: an ACK with ``jmspy-lease`` lends a delivery to a
token, and a SEND to ``/jmspy/leases`` from any connection settles or releases it; the
RECEIPT says how many messages that moved."""

from __future__ import annotations

import pytest
from stomp_pair import StompClient, StompPair

from jmspy.stomp_frames import Frame, header_dict
from jmspy.wire.headers import (
    LEASE,
    LEASE_COUNT,
    LEASE_FROM,
    LEASE_RELEASE,
    LEASE_SETTLE,
    LEASE_TTL,
    LEASES_DESTINATION,
)

INDIVIDUAL = "client-individual"


def bodies(frames: list[Frame]) -> list[str]:
    return [f.body.decode() for f in frames if f.command == "MESSAGE"]


def lent(pair: StompPair, n: int, token: str, version: str = "1.2", **ack: str
         ) -> StompClient:
    """A reader that takes all of q's messages and lends the first ``n`` to ``token``."""
    reader = pair.client(version)
    reader.subscribe("/queue/q", "s", ack=INDIVIDUAL)
    for message in list(reader.messages)[:n]:
        assert reader.ack(message, **{LEASE: token, **ack}) == []
    return reader


def request(client: StompClient, **headers: str) -> dict[str, str]:
    answer = client.frame("SEND", {"destination": LEASES_DESTINATION, "receipt": "r1",
                                   **headers})
    receipts = [f for f in answer if f.command == "RECEIPT"]
    assert len(receipts) == 1, answer
    return header_dict(receipts[0].headers)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_lent_messages_outlive_the_reader_and_a_settle_from_elsewhere_consumes_them(
        version: str) -> None:
    pair = StompPair()
    pair.client().send("/queue/q", "a", "b", "c")
    reader = lent(pair, 2, "job:0:1", version)
    reader.close()  # "c" was not lent: it goes back
    assert pair.broker.stats("q").delivering_count == 2
    driver = pair.client()
    answer = request(driver, **{LEASE_SETTLE: "job:0:1,job:0:2"})
    assert answer[LEASE_COUNT] == "2"
    stats = pair.broker.stats("q")
    assert (stats.message_count, stats.delivering_count, stats.dequeued) == (1, 0, 2)
    later = pair.client()
    assert bodies(later.subscribe("/queue/q", "s", ack=INDIVIDUAL)) == ["c"]


def test_a_release_redelivers_the_lent_messages_first_and_marked() -> None:
    pair = StompPair()
    pair.client().send("/queue/q", "a", "b", "c")
    lent(pair, 2, "t").close()
    assert request(pair.client(), **{LEASE_RELEASE: "t"})[LEASE_COUNT] == "2"
    again = pair.client().subscribe("/queue/q", "s", ack=INDIVIDUAL)
    assert bodies(again) == ["a", "b", "c"]
    assert [header_dict(m.headers).get("redelivered") for m in again] == [
        "true", "true", "true"]  # c came back with the reader's close, marked too


def test_the_lease_time_to_live_header_sets_when_it_runs_out() -> None:
    pair = StompPair()
    pair.client().send("/queue/q", "a")
    lent(pair, 1, "t", **{LEASE_TTL: "3000"}).close()
    pair.advance(2_999)
    assert pair.broker.leases.held("t") == 1
    pair.advance(1)
    assert pair.broker.leases.held("t") == 0
    assert bodies(pair.client().subscribe("/queue/q", "s")) == ["a"]


def test_lending_refills_the_readers_window_like_an_ack() -> None:
    pair = StompPair()
    pair.client().send("/queue/q", "a", "b", "c")
    reader = pair.client()
    got = reader.subscribe("/queue/q", "s", ack=INDIVIDUAL,
                           **{"jmspy-flow-limit": "1", "jmspy-flow-threshold": "100"})
    assert bodies(got) == ["a"]
    assert bodies(reader.ack(reader.messages[0], **{LEASE: "t"})) == ["b"]


@pytest.mark.parametrize(("headers", "why"), [
    ({}, "without one operation"),
    ({LEASE_SETTLE: "a", LEASE_RELEASE: "b"}, "without one operation"),
    ({LEASE_SETTLE: ","}, "without tokens"),
])
def test_a_malformed_lease_request_is_refused_with_what_to_send(
        headers: dict[str, str], why: str) -> None:
    pair = StompPair()
    client = pair.client()
    answer = client.frame("SEND", {"destination": LEASES_DESTINATION, "receipt": "r",
                                   **headers})
    (error,) = [f for f in answer if f.command == "ERROR"]
    assert why in header_dict(error.headers)["message"]


def test_a_lease_in_a_transaction_is_refused() -> None:
    pair = StompPair()
    pair.client().send("/queue/q", "a", "b")
    reader = pair.client()
    reader.subscribe("/queue/q", "s", ack=INDIVIDUAL)
    reader.frame("BEGIN", {"transaction": "tx"})
    answer = reader.ack(reader.messages[0], **{LEASE: "t", "transaction": "tx"})
    (error,) = [f for f in answer if f.command == "ERROR"]
    assert "lease in a transaction" in header_dict(error.headers)["message"]


def test_a_bad_lease_time_to_live_is_refused() -> None:
    pair = StompPair()
    pair.client().send("/queue/q", "a")
    reader = pair.client()
    reader.subscribe("/queue/q", "s", ack=INDIVIDUAL)
    answer = reader.ack(reader.messages[0], **{LEASE: "t", LEASE_TTL: "soon"})
    (error,) = [f for f in answer if f.command == "ERROR"]
    assert LEASE_TTL in header_dict(error.headers)["message"]


def test_one_ack_with_lease_from_lends_the_subscriptions_run_between_the_two_ids() -> None:
    """``jmspy-lease-from``: every unacked delivery of the subscription from that ack id
    to the ACK's own, in one frame; the deliveries outside the run stay unacked."""
    pair = StompPair()
    pair.client().send("/queue/q", "a", "b", "c", "d")
    reader = pair.client()
    reader.subscribe("/queue/q", "s", ack=INDIVIDUAL)
    _a, b, c, _d = reader.messages
    first = header_dict(b.headers)["ack"]
    assert reader.ack(c, **{LEASE: "run:1", LEASE_FROM: first}) == []
    assert pair.broker.leases.held("run:1") == 2  # b and c
    reader.close()  # a and d were not lent: they go back
    assert request(pair.client(), **{LEASE_SETTLE: "run:1"})[LEASE_COUNT] == "2"
    assert bodies(pair.client().subscribe("/queue/q", "s", ack=INDIVIDUAL)) == ["a", "d"]


@pytest.mark.parametrize("first", ["x", "-1", "99"])
def test_a_lease_from_that_is_no_ack_id_before_the_acks_own_is_refused(first: str) -> None:
    pair = StompPair()
    pair.client().send("/queue/q", "a", "b")
    reader = pair.client()
    reader.subscribe("/queue/q", "s", ack=INDIVIDUAL)
    answer = reader.ack(reader.messages[0], **{LEASE: "run:2", LEASE_FROM: first})
    errors = [f for f in answer if f.command == "ERROR"]
    assert errors and LEASE_FROM in header_dict(errors[0].headers)["message"]
    assert pair.broker.leases.held("run:2") == 0
