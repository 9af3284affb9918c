"""The broker's queue semantics over STOMP, in memory: StompSessions joined to client
parsers on a fake clock (stomp_pair.py), so every scenario asserts exact order and counts
with no socket, no sleep and no "wait until nothing more arrives" (what arrived is the
returned frame list), and every timer (lease, expiration, scheduled delivery) is proven by
advancing the clock to just before its deadline, then to it.

* ring queues (seed 000): the scenarios of tests/broker_core/test_core_ring.py, seen
  through the STOMP wire;
* AMPS-style queue settings (seed 001): leases and leasing, at-most-once, backlogs,
  expiration models, queue filters, fairness, max deliveries and cancels, priority,
  barriers, target queue depth;
* the destination's consumerFlowLimit, and the scheduled-delivery headers.

What needs real concurrent sockets stays in test_queue_semantics_wire.py."""

from __future__ import annotations

from typing import Any

import pytest
from stomp_pair import StompClient, StompPair

from jmspy.broker_ref.core import AddressSettings
from jmspy.stomp_frames import Frame, header_dict

RING = {"ring.#": AddressSettings(default_ring_size=3)}


def counts(pair: StompPair, name: str, *keys: str) -> tuple[int, ...]:
    st = pair.stats(name)
    return tuple(st[k] for k in keys)


def _ring_subscriber(version: str, dest: str, sub_id: str, *, prefetch: int
                     ) -> tuple[StompPair, StompClient]:
    """A pair with the ring settings and a client that subscribes to ``dest``
    client-individual with a window of ``prefetch`` messages."""
    pair = StompPair(settings=RING)
    client = pair.client(version)
    client.subscribe(dest, sub_id, ack="client-individual",
                     **{"activemq.prefetchSize": str(prefetch)})
    return pair, client


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ring_size_3_abcd_new_subscriber_receives_bcd_one_replaced(version: str) -> None:
    pair = StompPair(settings=RING)  # default-ring-size by match: auto-created queue
    c = pair.client(version)
    c.send("/queue/ring.abcd", "A", "B", "C")
    assert counts(pair, "ring.abcd", "messageCount") == (3,)
    c.send("/queue/ring.abcd", "D")
    assert counts(pair, "ring.abcd", "messageCount", "messagesReplaced", "deadLettered") == (
        3, 1, 0)
    c.subscribe("/queue/ring.abcd", "s")
    assert c.bodies() == ["B", "C", "D"]  # and nothing else: the session is quiet
    c.send("/queue/plain", *"ABCDE")  # a queue that matches no ring setting is unbounded
    assert counts(pair, "plain", "messageCount") == (5,)


def test_ring_explicit_ring_size_beats_default_ring_size() -> None:
    pair = StompPair(settings=RING)
    pair.broker.create_queue("ring.own", ring_size=2)
    c = pair.client()
    c.send("/queue/ring.own", *"ABCDE")
    assert counts(pair, "ring.own", "messageCount", "messagesReplaced") == (2, 3)
    c.subscribe("/queue/ring.own", "s", ack="client-individual")
    assert c.bodies() == ["D", "E"]


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ring_in_delivery_subscriber_holds_abcd_then_disconnects_bcd_remain(
    version: str,
) -> None:
    pair, consumer = _ring_subscriber(version, "/queue/ring.foo", "c", prefetch=10)
    producer = pair.client()
    for i, body in enumerate("ABCD", start=1):
        producer.send("/queue/ring.foo", body)
        # in delivery: not evictable, so messageCount goes one over the ring size
        assert counts(pair, "ring.foo", "messageCount", "deliveringCount") == (i, i)
    assert counts(pair, "ring.foo", "messagesReplaced") == (0,)
    assert consumer.bodies() == ["A", "B", "C", "D"]
    consumer.disconnect()  # the 4 unacked go back to the head in reverse order: A dropped
    assert counts(pair, "ring.foo", "messageCount", "messagesReplaced", "consumerCount",
                  "deliveringCount") == (3, 1, 0, 0)
    again = pair.client(version)
    again.subscribe("/queue/ring.foo", "d", ack="client-individual")
    assert again.bodies() == ["B", "C", "D"]
    heads = [header_dict(f.headers) for f in again.messages]
    assert all(h["redelivered"] == "true" and h["jmspy-delivery-count"] == "2" for h in heads)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ring_transaction_abort_of_acks_readds_to_head_and_drops_head_most(
    version: str,
) -> None:
    pair, c = _ring_subscriber(version, "/queue/ring.tx", "s", prefetch=4)
    c.send("/queue/ring.tx", *"ABCD")
    first = list(c.messages)
    assert c.bodies() == ["A", "B", "C", "D"]
    assert counts(pair, "ring.tx", "deliveringCount") == (4,)
    c.frame("BEGIN", {"transaction": "t1"})
    for frame in first:
        c.ack(frame, transaction="t1")
    c.frame("ABORT", {"transaction": "t1"})  # a rollback: the acks become cancels
    again = c.messages[4:]  # the window refills: what came back to the queue
    assert [m.body.decode() for m in again] == ["B", "C", "D"]
    assert all(header_dict(f.headers)["redelivered"] == "true" for f in again)
    assert counts(pair, "ring.tx", "messageCount", "messagesReplaced", "deadLettered") == (
        3, 1, 0)


def test_ring_scheduled_message_counts_then_is_dropped_on_arrival_at_full_ring() -> None:
    pair = StompPair(settings=RING)
    c = pair.client()
    c.send("/queue/ring.sched", "A", AMQ_SCHEDULED_DELAY="300")
    assert counts(pair, "ring.sched", "messageCount", "scheduledCount") == (1, 1)
    for i, body in enumerate("BCD", start=2):
        c.send("/queue/ring.sched", body)
        assert counts(pair, "ring.sched", "messageCount", "scheduledCount") == (i, 1)
    assert counts(pair, "ring.sched", "messagesReplaced") == (0,)  # 4: A not on it yet
    pair.advance(299)
    assert counts(pair, "ring.sched", "scheduledCount") == (1,)  # not due yet
    pair.advance(1)
    # A was put on the head of a full ring: A removed
    assert counts(pair, "ring.sched", "messageCount", "messagesReplaced", "scheduledCount") == (
        3, 1, 0)
    c.subscribe("/queue/ring.sched", "s")
    assert c.bodies() == ["B", "C", "D"]


def test_ring_size_lowered_at_runtime_deletes_nothing_at_once_then_never_grows() -> None:
    pair = StompPair(settings={"ring.#": AddressSettings(default_ring_size=5)})
    c = pair.client()
    c.send("/queue/ring.low", *"ABCDE")
    pair.broker.set_ring_size("ring.low", 3)
    assert counts(pair, "ring.low", "messageCount") == (5,)  # nothing deleted at once
    c.send("/queue/ring.low", "F")  # one in, one out: never grows
    assert counts(pair, "ring.low", "messageCount", "messagesReplaced") == (5, 1)
    c.subscribe("/queue/ring.low", "s")  # consumption shrinks it
    assert c.bodies() == ["B", "C", "D", "E", "F"]
    assert counts(pair, "ring.low", "messageCount") == (0,)
    c.frame("UNSUBSCRIBE", {"id": "s"})
    c.send("/queue/ring.low", *"GHIJ")  # now the new size holds
    assert counts(pair, "ring.low", "messageCount", "messagesReplaced") == (3, 2)
    c.subscribe("/queue/ring.low", "t")
    assert c.bodies()[5:] == ["H", "I", "J"]


# -- AMPS-style queue settings (seed 001) -------------------------------------------------
INDIVIDUAL = "client-individual"
DLQ_REASON = "JMS_jmspy_DeadLetterReason"
ORIGINAL = "JMS_jmspy_OriginalDestination"


def amps(**settings: Any) -> StompPair:
    """A pair whose ``amps.#`` queues have these AMPS-style settings."""
    return StompPair(settings={"amps.#": AddressSettings(**settings)})


def heads(frame: Frame) -> dict[str, str]:
    h: dict[str, str] = header_dict(frame.headers)
    return h


def bodies(frames: list[Frame]) -> list[str]:
    """The bodies of ``frames``, which must all be MESSAGE frames."""
    assert all(f.command == "MESSAGE" for f in frames), frames
    return [f.body.decode() for f in frames]


def delivered(frames: list[Frame]) -> dict[str, list[str]]:
    """The bodies of ``frames`` (all MESSAGE frames) by subscription id, in the order each
    subscriber received them."""
    out: dict[str, list[str]] = {}
    for body, f in zip(bodies(frames), frames, strict=True):
        out.setdefault(heads(f)["subscription"], []).append(body)
    return out


def commands(frames: list[Frame]) -> list[str]:
    return [f.command for f in frames]


def errors(client: StompClient) -> list[Frame]:
    return [f for f in client.others if f.command == "ERROR"]


def dead_letters(pair: StompPair) -> list[Frame]:
    """Everything on /queue/DLQ, taken by a fresh 1.2 client (ack:auto)."""
    return pair.client().subscribe("/queue/DLQ", "dlq")


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_lease_expiry_redelivers_to_other_subscriber_at_lease_end_strict_late_ack_is_error(
    version: str,
) -> None:
    """leasing=strict (AddressSettings.leasing): an ACK after the lease ran out, while another
    subscriber holds the message, is refused: an ERROR frame (message header + the core's
    explanation naming ``leasing=strict``) and the session closes."""
    pair = amps(lease_period_ms=150, leasing="strict")
    c1 = pair.client(version)
    c1.subscribe("/queue/amps.lease", "s1", ack=INDIVIDUAL, **{"activemq.prefetchSize": "1"})
    (first,) = c1.send("/queue/amps.lease", "A")
    c2 = pair.client(version)
    assert c2.subscribe("/queue/amps.lease", "s2", ack=INDIVIDUAL) == []  # A is leased
    assert pair.advance(149) == []  # the lease runs 150 ms from the delivery
    (second,) = pair.advance(1)  # it ran out: back to the head, and on to s2
    assert c2.messages == [second] and c1.messages == [first]
    assert second.body == b"A"
    assert (heads(second)["subscription"], heads(second)["redelivered"],
            heads(second)["jmspy-delivery-count"]) == ("s2", "true", "2")
    (err,) = c1.ack(first)  # too late, and c2 holds it now
    assert errors(c1) == [err]
    assert "lease of delivery tag" in heads(err)["message"]
    assert b"leasing=strict" in err.body and b"no effect" in err.body
    assert c1.session.closing  # the host closes the socket once the ERROR is written
    assert counts(pair, "amps.lease", "messageCount", "deliveringCount", "dequeued") == (
        1, 1, 0)
    assert commands(c2.ack(second, receipt="acked")) == ["RECEIPT"]
    assert counts(pair, "amps.lease", "messageCount", "deliveringCount", "dequeued") == (
        0, 0, 1)
    assert errors(c2) == []


def test_leasing_sublet_late_ack_consumes_message_current_holders_ack_is_ignored() -> None:
    """leasing=sublet (the default): any holder of an old tag may ACK; the message is
    consumed and the current holder's own ACK is a silent no-op (RECEIPT, no ERROR)."""
    pair = amps(lease_period_ms=150, leasing="sublet")
    c1 = pair.client()
    c1.subscribe("/queue/amps.sublet", "s1", ack=INDIVIDUAL, **{"activemq.prefetchSize": "1"})
    (first,) = c1.send("/queue/amps.sublet", "A")
    c2 = pair.client()
    assert c2.subscribe("/queue/amps.sublet", "s2", ack=INDIVIDUAL) == []
    assert pair.advance(149) == []
    (second,) = pair.advance(1)
    assert (heads(second)["subscription"], heads(second)["jmspy-delivery-count"]) == (
        "s2", "2")
    late = c1.ack(first, receipt="late")
    assert commands(late) == ["RECEIPT"] and heads(late[0])["receipt-id"] == "late"
    assert counts(pair, "amps.sublet", "messageCount", "deliveringCount", "dequeued") == (
        0, 0, 1)
    noop = c2.ack(second, receipt="noop")
    assert commands(noop) == ["RECEIPT"] and heads(noop[0])["receipt-id"] == "noop"
    assert counts(pair, "amps.sublet", "dequeued") == (1,)
    assert errors(c1) == [] and errors(c2) == []
    assert not c1.session.closing and not c2.session.closing


def test_at_most_once_message_consumed_when_sent_client_ack_only_moves_window() -> None:
    """The message is consumed when sent. A ``client-individual`` subscriber's ACK has
    nothing left to settle: it is receipted and only reopens the subscriber's window; the
    message is never redelivered."""
    pair = amps(semantics="at-most-once")
    c = pair.client()
    c.subscribe("/queue/amps.amo", "s", ack=INDIVIDUAL)
    assert bodies(c.send("/queue/amps.amo", "A")) == ["A"]
    (a,) = c.messages
    assert counts(pair, "amps.amo", "messageCount", "deliveringCount", "dequeued") == (0, 0, 1)
    assert commands(c.ack(a, receipt="ack-a")) == ["RECEIPT"]
    assert errors(c) == []
    assert bodies(c.send("/queue/amps.amo", "B")) == ["B"]
    assert c.bodies() == ["A", "B"]
    assert commands(c.close()) == ["RECEIPT"]  # B was never acked: nothing goes back
    again = pair.client()
    assert again.subscribe("/queue/amps.amo", "t", ack=INDIVIDUAL) == []
    assert pair.broker.next_deadline() is None  # no timer either: nothing can come later
    assert counts(pair, "amps.amo", "messageCount") == (0,)


def test_at_least_once_default_redelivers_unacked_message_to_next_subscriber_after_disconnect(
) -> None:
    pair = amps(semantics="at-least-once", max_deliveries=5)
    c = pair.client()
    c.subscribe("/queue/amps.alo", "s", ack=INDIVIDUAL)
    assert bodies(c.send("/queue/amps.alo", "A")) == ["A"]
    assert counts(pair, "amps.alo", "deliveringCount") == (1,)
    assert commands(c.close()) == ["RECEIPT"]
    again = pair.client()
    (m,) = again.subscribe("/queue/amps.alo", "t", ack=INDIVIDUAL)
    assert (m.body, heads(m)["jmspy-delivery-count"]) == (b"A", "2")


def test_max_backlog_caps_unacked_messages_of_whole_queue_an_ack_lets_exactly_one_more_out(
) -> None:
    pair = amps(max_backlog=2)
    c1, c2 = pair.client(), pair.client()
    c1.subscribe("/queue/amps.mb", "s1", ack=INDIVIDUAL)
    c2.subscribe("/queue/amps.mb", "s2", ack=INDIVIDUAL)
    # though each has a window of 1000: two in delivery for the whole queue
    assert delivered(c1.send("/queue/amps.mb", *"01234")) == {"s1": ["0"], "s2": ["1"]}
    assert counts(pair, "amps.mb", "messageCount", "deliveringCount") == (5, 2)
    assert delivered(c1.ack(c1.messages[0])) == {"s1": ["2"]}
    assert counts(pair, "amps.mb", "messageCount", "deliveringCount") == (4, 2)


def test_max_per_subscription_backlog_grants_the_lower_of_asked_and_max_default_one() -> None:
    """A STOMP subscriber asks with ``jmspy-backlog``; the broker grants the lower of that
    and MaxPerSubscriptionBacklog; one that does not ask gets the AMPS default of 1."""
    pair = amps(max_per_subscription_backlog=5)
    window = {"activemq.prefetchSize": "10"}
    c = pair.client()
    c.subscribe("/queue/amps.mpsb", "s", ack=INDIVIDUAL, **window, **{"jmspy-backlog": "3"})
    assert bodies(c.send("/queue/amps.mpsb", *"ABCDEF")) == ["A", "B", "C"]  # asked 3 < 5
    assert counts(pair, "amps.mpsb", "deliveringCount") == (3,)
    c.close()
    c = pair.client()
    got = c.subscribe("/queue/amps.mpsb", "t", ack=INDIVIDUAL, **window,
                      **{"jmspy-backlog": "50"})
    assert bodies(got) == ["A", "B", "C", "D", "E"]  # capped at max 5
    assert counts(pair, "amps.mpsb", "deliveringCount") == (5,)
    c.close()
    c = pair.client()
    (a,) = c.subscribe("/queue/amps.mpsb", "u", ack=INDIVIDUAL, **window)  # did not ask: 1
    assert a.body == b"A"
    assert counts(pair, "amps.mpsb", "deliveringCount") == (1,)
    assert bodies(c.ack(a)) == ["B"]
    assert counts(pair, "amps.mpsb", "deliveringCount") == (1,)


# each message's expiry (ms after it was sent, None: never) under each expiration model:
# queue expiration 400 ms; STOMP ``expires`` puts "short" at +150 and "long" at +3000
EXPIRES = {"short": 150, "long": 3000, "none": None}


@pytest.mark.parametrize(
    ("model", "expiry"),
    [
        ("queue", {"short": 400, "long": 400, "none": 400}),  # the queue's value only
        ("latest", {"short": 400, "long": 3000, "none": None}),
        ("earliest", {"short": 150, "long": 400, "none": 400}),
        ("default", {"short": 150, "long": 3000, "none": 400}),  # the message's, else queue's
    ],
)
def test_expiration_ms_with_expiration_model_expires_at_exact_deadline_to_dlq_with_reason(
    model: str, expiry: dict[str, int | None],
) -> None:
    pair = amps(expiration_ms=400, expiration_model=model)
    c = pair.client()
    t0 = pair.clock.now
    for body, after in EXPIRES.items():
        c.send("/queue/amps.exp", body,
               **({} if after is None else {"expires": str(t0 + after)}))

    def alive(at: int) -> list[str]:
        return [b for b, due in expiry.items() if due is None or due > at]

    elapsed = 0
    for at in (149, 150, 270, 399, 400):  # each deadline just before and at it; +270 too
        pair.advance(at - elapsed)
        elapsed = at
        gone = 3 - len(alive(at))
        assert counts(pair, "amps.exp", "messageCount", "expired", "deadLettered") == (
            len(alive(at)), gone, gone), at
    assert bodies(c.subscribe("/queue/amps.exp", "s")) == alive(400)
    dead = dead_letters(pair)
    # dead-lettered in the order they expired (send order among equal deadlines)
    order = sorted((b for b in expiry if b not in alive(400)),
                   key=lambda b: (expiry[b], list(EXPIRES).index(b)))
    assert bodies(dead) == order
    assert {heads(f)[DLQ_REASON] for f in dead} == {"expired"}
    assert {heads(f)[ORIGINAL] for f in dead} == {"amps.exp"}


def test_queue_filter_only_matching_messages_are_queued() -> None:
    pair = amps(filter="region = 'EU' AND JMSPriority > 3")
    c = pair.client()
    c.send("/queue/amps.filt", "eu", region="EU")
    c.send("/queue/amps.filt", "us", region="US")
    c.send("/queue/amps.filt", "eu-low", region="EU", priority="1")
    assert counts(pair, "amps.filt", "messageCount", "enqueued", "deadLettered") == (1, 1, 0)
    (m,) = c.subscribe("/queue/amps.filt", "s")
    assert (m.body, heads(m)["region"]) == (b"eu", "EU")


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("fast", {"s1": ["0", "1", "2", "3"]}),
        ("round-robin", {"s1": ["0", "2"], "s2": ["1", "3"]}),
        ("proportional", {"s1": ["0", "2", "3"], "s2": ["1"]}),
    ],
)
def test_fairness_model_fast_fills_first_round_robin_alternates_proportional_by_window_use(
    model: str, expected: dict[str, list[str]],
) -> None:
    """Windows 6 and 2 (activemq.prefetchSize; no backlog header exists, so proportional
    uses unacked / (unacked + credit)): fast fills the first subscriber, round-robin
    alternates, proportional keeps both at about the same fraction of their window."""
    pair = amps(fairness_model=model)
    c1, c2 = pair.client(), pair.client()
    c1.subscribe("/queue/amps.fair", "s1", ack=INDIVIDUAL, **{"activemq.prefetchSize": "6"})
    c2.subscribe("/queue/amps.fair", "s2", ack=INDIVIDUAL, **{"activemq.prefetchSize": "2"})
    assert delivered(c1.send("/queue/amps.fair", *"0123")) == expected
    assert counts(pair, "amps.fair", "deliveringCount") == (4,)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_max_deliveries_second_nack_dead_letters_instead_of_redelivering_with_reason_header(
    version: str,
) -> None:
    pair = amps(max_deliveries=2)
    c = pair.client(version)
    c.subscribe("/queue/amps.md", "s", ack=INDIVIDUAL)
    (first,) = c.send("/queue/amps.md", "A", color="red")
    (second,) = c.nack(first)
    assert (second.body, heads(second)["jmspy-delivery-count"]) == (b"A", "2")
    assert c.nack(second) == []  # delivered twice: dead-lettered instead of returned
    assert counts(pair, "amps.md", "messageCount", "deadLettered") == (0, 1)
    assert len(c.messages) == 2
    (dead,) = dead_letters(pair)
    assert dead.body == b"A" and heads(dead)["color"] == "red"
    assert heads(dead)[DLQ_REASON] == "max deliveries (2) exceeded"
    assert heads(dead)[ORIGINAL] == "amps.md"


def test_max_cancels_nack_and_transaction_abort_count_message_lands_on_dlq_with_reason(
) -> None:
    pair = amps(max_cancels=2, max_delivery_attempts=0)
    c = pair.client()
    c.subscribe("/queue/amps.mc", "s", ack=INDIVIDUAL)
    (first,) = c.send("/queue/amps.mc", "A")
    (second,) = c.nack(first)  # cancel 1
    c.frame("BEGIN", {"transaction": "t"})
    assert c.ack(second, transaction="t") == []
    assert c.frame("ABORT", {"transaction": "t"}) == []  # a rollback is a cancel: cancel 2
    assert counts(pair, "amps.mc", "messageCount", "deadLettered") == (0, 1)
    assert len(c.messages) == 2
    (dead,) = dead_letters(pair)
    assert dead.body == b"A"
    assert heads(dead)[DLQ_REASON] == "max cancels (2) exceeded"


@pytest.mark.parametrize("settings", [{}, {"fairness_model": "fast"}], ids=["plain", "amps"])
def test_priority_header_higher_first_fifo_among_equals_no_header_is_4(
    settings: dict[str, Any],
) -> None:
    pair = amps(**settings)
    c = pair.client()
    for body, prio in [("l1", 1), ("h1", 9), ("m1", 4), ("h2", 9), ("l2", 1), ("d", None)]:
        c.send("/queue/amps.prio", body, **({} if prio is None else {"priority": str(prio)}))
    got = c.subscribe("/queue/amps.prio", "s")
    assert bodies(got) == ["h1", "h2", "m1", "d", "l1", "l2"]  # no header: 4
    assert [heads(f)["priority"] for f in got] == ["9", "9", "4", "4", "1", "1"]


def test_barrier_expression_waits_for_earlier_acks_then_goes_to_every_subscriber() -> None:
    pair = amps(barrier_expression="sync IS NOT NULL")
    c1, c2 = pair.client(), pair.client()
    c1.subscribe("/queue/amps.bar", "s1", ack=INDIVIDUAL)
    c2.subscribe("/queue/amps.bar", "s2", ack=INDIVIDUAL)
    sent = c1.send("/queue/amps.bar", "A", "B")
    sent += c1.send("/queue/amps.bar", "SYNC", sync="1")
    sent += c1.send("/queue/amps.bar", "C")
    assert delivered(sent) == {"s1": ["A"], "s2": ["B"]}  # SYNC and C are held
    (a,), (b,) = c1.messages, c2.messages
    assert commands(c1.ack(a, receipt="a")) == ["RECEIPT"]  # B still unacknowledged
    # SYNC to each subscriber first, then the rest (C), once
    assert delivered(c2.ack(b)) == {"s1": ["SYNC", "C"], "s2": ["SYNC"]}
    assert counts(pair, "amps.bar", "deliveringCount") == (3,)
    for client in (c1, c2):
        for f in client.messages[1:]:
            assert client.ack(f) == []
    assert counts(pair, "amps.bar", "messageCount", "deliveringCount") == (0, 0)


def test_target_queue_depth_only_oldest_n_messages_are_deliverable() -> None:
    pair = amps(target_queue_depth=1000)
    c = pair.client()
    for i in range(1000):
        c.send("/queue/amps.tqd", f"r{i}", color="red")
    c.send("/queue/amps.tqd", "blue", color="blue")
    blue = pair.client()
    # a match exists, but outside the active 1000
    assert blue.subscribe("/queue/amps.tqd", "b", ack=INDIVIDUAL, selector="color = 'blue'") == []
    red = pair.client()
    got = red.subscribe("/queue/amps.tqd", "r", ack=INDIVIDUAL, selector="color = 'red'",
                        **{"activemq.prefetchSize": "1"})
    assert bodies(got) == ["r0"] and blue.messages == []  # in delivery still uses the target
    # r0 acked: blue moves into the active 1000, and red's window takes r1
    assert delivered(red.ack(red.messages[0])) == {"b": ["blue"], "r": ["r1"]}


# -- consumerFlowLimit, scheduled delivery -------------------------------------------------
@pytest.mark.parametrize(
    ("header", "client", "destination", "effective"),
    [
        ("jmspy-flow-limit", 100, 5, 5),
        ("jmspy-flow-limit", 3, 5, 3),
        ("activemq.prefetchSize", 100, 4, 4),
        ("activemq.prefetchSize", 2, 4, 2),
    ],
)
def test_consumer_flow_limit_lower_of_client_and_destination_wins(
    header: str, client: int, destination: int, effective: int,
) -> None:
    pair = StompPair(settings={"limited.#": AddressSettings(consumer_flow_limit=destination)})
    c = pair.client()
    c.send("/queue/limited.q", *(f"m{i}" for i in range(20)))
    # threshold 100 %: every ACK tops the window up at once (as activemq.prefetchSize does)
    extra = {"jmspy-flow-threshold": "100"} if header == "jmspy-flow-limit" else {}
    got = c.subscribe("/queue/limited.q", "s", ack=INDIVIDUAL, **{header: str(client)}, **extra)
    assert bodies(got) == [f"m{i}" for i in range(effective)]
    assert counts(pair, "limited.q", "deliveringCount") == (effective,)
    # one slot frees: exactly one more, never above the limit
    assert bodies(c.ack(got[0])) == [f"m{effective}"]
    assert counts(pair, "limited.q", "deliveringCount") == (effective,)


@pytest.mark.parametrize(("version", "header"),
                         [("1.1", "AMQ_SCHEDULED_DELAY"), ("1.2", "jmspy-delivery-delay")])
def test_scheduled_delivery_header_counts_scheduled_then_delivers_exactly_at_delay(
    version: str, header: str,
) -> None:
    pair = StompPair()
    c = pair.client(version)
    c.subscribe("/queue/sched", "s", ack=INDIVIDUAL)
    assert c.send("/queue/sched", "later", **{header: "200"}) == []
    assert counts(pair, "sched", "messageCount", "scheduledCount", "deliveringCount") == (
        1, 1, 0)
    assert pair.advance(199) == []  # not due yet
    (m,) = pair.advance(1)
    assert m.body == b"later"
    assert counts(pair, "sched", "messageCount", "scheduledCount", "deliveringCount") == (
        1, 0, 1)
