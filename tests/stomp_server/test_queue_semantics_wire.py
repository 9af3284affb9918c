"""Issue 3 item 3: every queue semantic proved over the wire — unmodified stomp.py (1.2, and
1.1 where parametrized) sending real frames over loopback to the STOMP server, asserting on
what the client receives and on the broker's counters (read on the server loop thread).

Ring queues follow seed 000 exactly (the scenarios of tests/broker_core/test_core_ring.py):
the single-client scenarios run in memory on a fake clock in test_queue_semantics_pair.py;
here stay those that need real concurrent clients.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from stomp_support import Collector, ServerHandle

from jmspy.broker_ref.core import AddressSettings

Connect = Callable[..., tuple[Any, Collector]]
RING = {"ring.#": AddressSettings(default_ring_size=3)}


# ------------------------------------------------------------------ helpers


def send_bodies(conn: Any, dest: str, bodies: str | list[str], lst: Collector,
                **headers: str) -> None:
    """SEND each body (in order), the last with a receipt, and wait for that receipt: the
    server has acted on every frame before this returns."""
    items = list(bodies)
    rid = f"sent-{dest}-{items[-1]}-{time.monotonic_ns()}"
    for i, body in enumerate(items):
        extra = {"receipt": rid} if i == len(items) - 1 else {}
        conn.send(dest, body, headers=dict(headers), **extra)
    lst.wait_receipt(rid)


def sync(conn: Any, lst: Collector) -> None:
    """A receipt round trip: every frame sent before it has been processed."""
    rid = f"sync-{time.monotonic_ns()}"
    conn.send("/queue/probe.sync", "", receipt=rid)
    lst.wait_receipt(rid)


def ack(conn: Any, version: str, frame: Any, **kw: Any) -> None:
    """ACK ``frame`` the way the negotiated version wants it."""
    h = frame.headers
    if version == "1.2":
        conn.ack(h["ack"], **kw)
    else:
        conn.ack(h["message-id"], h["subscription"], **kw)


def nack(conn: Any, version: str, frame: Any) -> None:
    h = frame.headers
    if version == "1.2":
        conn.nack(h["ack"])
    else:
        conn.nack(h["message-id"], h["subscription"])


def bodies_of(frames: list[Any]) -> list[str]:
    return [f.body for f in frames]


def settle(lst: Collector, n: int, quiet: float = 0.05) -> list[Any]:
    """Wait for ``n`` messages, then make sure no more arrive for ``quiet`` seconds."""
    lst.wait_messages(n)
    time.sleep(quiet)
    with lst.lock:
        got = list(lst.messages)
    assert len(got) == n, f"expected exactly {n} messages, got {bodies_of(got)}"
    return got


# ------------------------------------------------------------------ ring queues (seed 000)


def test_ring_interleaved_stomp_producers_never_leave_more_than_ring_size(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    h = server_factory(settings=RING)
    producers = [connect("1.1" if i % 2 else "1.2", handle=h) for i in range(5)]
    per_producer = 40
    seen: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                seen.append(h.stats("ring.many")["messageCount"])
            except Exception:  # not auto-created yet
                pass
            time.sleep(0.001)

    def produce(index: int, conn: Any, lst: Collector) -> None:
        send_bodies(conn, "/queue/ring.many",
                    [f"p{index}-{n}" for n in range(per_producer)], lst)

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=produce, args=(i, c, lst))
               for i, (c, lst) in enumerate(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    stop.set()
    sampler.join(5)
    total = per_producer * len(producers)
    assert seen and max(seen) <= 3
    st = h.stats("ring.many")
    assert (st["messageCount"], st["messagesReplaced"], st["enqueued"]) == (3, total - 3, total)
    conn, lst = producers[0]
    conn.subscribe("/queue/ring.many", id="s")
    survivors = bodies_of(settle(lst, 3))
    # each survivor is one of the last three any producer sent, in per-producer order
    by_producer: dict[str, list[int]] = {}
    for body in survivors:
        p, n = body.split("-")
        by_producer.setdefault(p, []).append(int(n))
    for numbers in by_producer.values():
        assert numbers == sorted(numbers) and numbers[0] >= per_producer - 3


# ------------------------------------------------------------------ AMPS settings (seed 001)

DLQ_REASON = "JMS_jmspy_DeadLetterReason"
ORIGINAL = "JMS_jmspy_OriginalDestination"


def amps(server_factory: Callable[..., ServerHandle], **settings: Any) -> ServerHandle:
    """A server whose ``amps.#`` queues have these AMPS-style settings."""
    return server_factory(settings={"amps.#": AddressSettings(**settings)})


def subscribe(conn: Any, lst: Collector, dest: str, sid: str, ack_mode: str = "client-individual",
              **headers: str) -> None:
    """SUBSCRIBE and wait for its receipt (the consumer exists on the broker)."""
    conn.subscribe(dest, id=sid, ack=ack_mode, headers=headers, receipt=f"sub-{sid}")
    lst.wait_receipt(f"sub-{sid}")


def wait_total(listeners: list[Collector], n: int, quiet: float = 0.05) -> None:
    """Wait until the listeners together hold ``n`` messages, and no more arrive."""
    deadline = time.monotonic() + 2
    while sum(len(x.messages) for x in listeners) < n and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(quiet)
    assert sum(len(x.messages) for x in listeners) == n


def dead_letters(h: ServerHandle, connect: Connect, n: int) -> list[Any]:
    """Consume the ``n`` messages on /queue/DLQ with a fresh 1.2 connection."""
    conn, lst = connect("1.2", handle=h)
    conn.subscribe("/queue/DLQ", id="dlq")
    return settle(lst, n)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_lease_period_expiry_redelivers_to_other_subscriber_strict_late_ack_gets_error(
    server_factory: Callable[..., ServerHandle], connect: Connect, version: str
) -> None:
    """leasing=strict (AddressSettings.leasing): an ACK after the lease ran out, while another
    subscriber holds the message, is refused — over STOMP that is an ERROR frame (message
    header + the core's explanation naming ``leasing=strict``) and the connection closes."""
    h = amps(server_factory, lease_period_ms=150, leasing="strict")
    c1, l1 = connect(version, handle=h)
    subscribe(c1, l1, "/queue/amps.lease", "s1", **{"activemq.prefetchSize": "1"})
    send_bodies(c1, "/queue/amps.lease", "A", l1)
    (first,) = l1.wait_messages(1)
    c2, l2 = connect(version, handle=h)
    subscribe(c2, l2, "/queue/amps.lease", "s2")
    started = time.monotonic()
    (second,) = l2.wait_messages(1, timeout=1.5)  # the lease ran out: back to the head
    assert time.monotonic() - started >= 0.05
    assert second.body == "A"
    assert (second.headers["redelivered"], second.headers["jmspy-delivery-count"]) == (
        "true", "2")
    ack(c1, version, first)  # too late, and c2 holds it now
    l1.disconnected.wait(2)
    assert l1.disconnected.is_set()
    (err,) = l1.errors
    assert "lease of delivery tag" in err.headers["message"]
    assert "leasing=strict" in err.body and "no effect" in err.body
    st = h.stats("amps.lease")
    assert (st["messageCount"], st["deliveringCount"], st["dequeued"]) == (1, 1, 0)
    ack(c2, version, second, receipt="acked")
    l2.wait_receipt("acked")
    st = h.stats("amps.lease")
    assert (st["messageCount"], st["deliveringCount"], st["dequeued"]) == (0, 0, 1)
    assert l2.errors == []


def test_leasing_sublet_late_ack_consumes_message_current_holders_ack_is_ignored(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    """leasing=sublet (the default): any holder of an old tag may ACK; the message is
    consumed and the current holder's own ACK is a silent no-op (RECEIPT, no ERROR)."""
    h = amps(server_factory, lease_period_ms=150, leasing="sublet")
    c1, l1 = connect("1.2", handle=h)
    subscribe(c1, l1, "/queue/amps.sublet", "s1", **{"activemq.prefetchSize": "1"})
    send_bodies(c1, "/queue/amps.sublet", "A", l1)
    (first,) = l1.wait_messages(1)
    c2, l2 = connect("1.2", handle=h)
    subscribe(c2, l2, "/queue/amps.sublet", "s2")
    (second,) = l2.wait_messages(1, timeout=1.5)
    assert second.headers["jmspy-delivery-count"] == "2"
    ack(c1, "1.2", first, receipt="late")
    l1.wait_receipt("late")
    st = h.stats("amps.sublet")
    assert (st["messageCount"], st["deliveringCount"], st["dequeued"]) == (0, 0, 1)
    ack(c2, "1.2", second, receipt="noop")
    l2.wait_receipt("noop")
    assert h.stats("amps.sublet")["dequeued"] == 1
    assert l1.errors == [] and l2.errors == []


def test_semantics_at_most_once_consumed_when_sent_client_ack_only_moves_window(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    """The message is consumed when sent. A ``client-individual`` subscriber's ACK has
    nothing left to settle: it is receipted and only reopens the subscriber's window; the
    message is never redelivered."""
    h = amps(server_factory, semantics="at-most-once")
    conn, lst = connect("1.2", handle=h)
    subscribe(conn, lst, "/queue/amps.amo", "s")  # client-individual
    send_bodies(conn, "/queue/amps.amo", "A", lst)
    (a,) = lst.wait_messages(1)
    assert a.body == "A"
    st = h.stats("amps.amo")
    assert (st["messageCount"], st["deliveringCount"], st["dequeued"]) == (0, 0, 1)
    ack(conn, "1.2", a, receipt="ack-a")
    lst.wait_receipt("ack-a")
    assert lst.errors == []
    send_bodies(conn, "/queue/amps.amo", "B", lst)
    assert [m.body for m in lst.wait_messages(2)] == ["A", "B"]
    conn.disconnect()
    again, alst = connect("1.2", handle=h)
    subscribe(again, alst, "/queue/amps.amo", "t")
    time.sleep(0.1)
    assert alst.messages == []
    assert h.stats("amps.amo")["messageCount"] == 0


def test_semantics_at_least_once_default_redelivers_unacked_on_disconnect(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    h = amps(server_factory, semantics="at-least-once", max_deliveries=5)
    conn, lst = connect("1.2", handle=h)
    subscribe(conn, lst, "/queue/amps.alo", "s")
    send_bodies(conn, "/queue/amps.alo", "A", lst)
    lst.wait_messages(1)
    assert h.stats("amps.alo")["deliveringCount"] == 1
    conn.disconnect()
    again, alst = connect("1.2", handle=h)
    subscribe(again, alst, "/queue/amps.alo", "t")
    (m,) = settle(alst, 1)
    assert (m.body, m.headers["jmspy-delivery-count"]) == ("A", "2")


def test_max_backlog_caps_unacked_messages_of_the_whole_queue(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    h = amps(server_factory, max_backlog=2)
    c1, l1 = connect("1.2", handle=h)
    c2, l2 = connect("1.2", handle=h)
    subscribe(c1, l1, "/queue/amps.mb", "s1")
    subscribe(c2, l2, "/queue/amps.mb", "s2")
    send_bodies(c1, "/queue/amps.mb", "01234", l1)
    h.wait_stats("amps.mb", "deliveringCount", 2)
    wait_total([l1, l2], 2)  # though each had a window of 1000
    assert h.stats("amps.mb")["messageCount"] == 5
    holder, hl = (c1, l1) if l1.messages else (c2, l2)
    ack(holder, "1.2", hl.messages[0])
    wait_total([l1, l2], 3)
    st = h.stats("amps.mb")
    assert (st["messageCount"], st["deliveringCount"]) == (4, 2)


def test_max_per_subscription_backlog_grants_the_lower_of_asked_and_max_default_one(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    """A STOMP subscriber asks with ``jmspy-backlog``; the broker grants the lower of that
    and MaxPerSubscriptionBacklog; one that does not ask gets the AMPS default of 1."""
    h = amps(server_factory, max_per_subscription_backlog=5)
    conn, lst = connect("1.2", handle=h)
    subscribe(conn, lst, "/queue/amps.mpsb", "s",
              **{"activemq.prefetchSize": "10", "jmspy-backlog": "3"})
    send_bodies(conn, "/queue/amps.mpsb", "ABCDEF", lst)
    settle(lst, 3)
    assert h.stats("amps.mpsb")["deliveringCount"] == 3  # asked 3 < max 5
    conn.disconnect()
    conn, lst = connect("1.2", handle=h)
    subscribe(conn, lst, "/queue/amps.mpsb", "t",
              **{"activemq.prefetchSize": "10", "jmspy-backlog": "50"})
    settle(lst, 5)
    assert h.stats("amps.mpsb")["deliveringCount"] == 5  # capped at max 5
    conn.disconnect()
    conn, lst = connect("1.2", handle=h)
    subscribe(conn, lst, "/queue/amps.mpsb", "u", **{"activemq.prefetchSize": "10"})
    (a,) = settle(lst, 1)
    assert h.stats("amps.mpsb")["deliveringCount"] == 1  # did not ask: default 1
    ack(conn, "1.2", a)
    settle(lst, 2)
    assert h.stats("amps.mpsb")["deliveringCount"] == 1


@pytest.mark.parametrize(
    ("model", "alive_mid", "alive_end"),
    [
        ("queue", ["short", "long", "none"], []),
        ("latest", ["short", "long", "none"], ["long", "none"]),
        ("earliest", ["long", "none"], []),
        ("default", ["long", "none"], ["long"]),
    ],
)
def test_expiration_ms_with_expiration_model_expired_go_to_dlq_with_reason(
    server_factory: Callable[..., ServerHandle], connect: Connect, model: str,
    alive_mid: list[str], alive_end: list[str],
) -> None:
    """Queue expiration 400 ms; "short" expires (STOMP ``expires``) at +150 ms, "long" at
    +3 s, "none" never. Checked at ~+270 ms and after +400 ms (core test, scaled)."""
    h = amps(server_factory, expiration_ms=400, expiration_model=model)
    conn, lst = connect("1.2", handle=h)
    t0 = time.monotonic()
    now_ms = int(time.time() * 1000)
    conn.send("/queue/amps.exp", "short", headers={"expires": str(now_ms + 150)})
    conn.send("/queue/amps.exp", "long", headers={"expires": str(now_ms + 3000)})
    conn.send("/queue/amps.exp", "none", receipt="sent")
    lst.wait_receipt("sent")
    time.sleep(max(0.0, 0.27 - (time.monotonic() - t0)))
    assert h.stats("amps.exp")["messageCount"] == len(alive_mid)
    gone = 3 - len(alive_end)
    h.wait_stats("amps.exp", "expired", gone, timeout=1)
    st = h.stats("amps.exp")
    assert (st["messageCount"], st["deadLettered"]) == (len(alive_end), gone)
    if alive_end:
        subscribe(conn, lst, "/queue/amps.exp", "s", "auto")
        assert bodies_of(settle(lst, len(alive_end))) == alive_end
    dead = dead_letters(h, connect, gone)
    assert {f.headers[DLQ_REASON] for f in dead} == {"expired"}
    assert {f.headers[ORIGINAL] for f in dead} == {"amps.exp"}
    assert sorted(bodies_of(dead)) == sorted({"short", "long", "none"} - set(alive_end))


def test_queue_filter_only_matching_messages_are_queued(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    h = amps(server_factory, filter="region = 'EU' AND JMSPriority > 3")
    conn, lst = connect("1.2", handle=h)
    conn.send("/queue/amps.filt", "eu", headers={"region": "EU"})
    conn.send("/queue/amps.filt", "us", headers={"region": "US"})
    send_bodies(conn, "/queue/amps.filt", ["eu-low"], lst, region="EU", priority="1")
    st = h.stats("amps.filt")
    assert (st["messageCount"], st["enqueued"], st["deadLettered"]) == (1, 1, 0)
    subscribe(conn, lst, "/queue/amps.filt", "s", "auto")
    (m,) = settle(lst, 1)
    assert (m.body, m.headers["region"]) == ("eu", "EU")


@pytest.mark.parametrize(
    ("model", "expected"),
    [("fast", (4, 0)), ("round-robin", (2, 2)), ("proportional", (3, 1))],
)
def test_fairness_model_distribution_between_two_subscribers(
    server_factory: Callable[..., ServerHandle], connect: Connect, model: str,
    expected: tuple[int, int],
) -> None:
    """Windows 6 and 2 (activemq.prefetchSize; no backlog header exists, so proportional
    uses unacked / (unacked + credit)): fast fills the first subscriber, round-robin
    alternates, proportional keeps both at about the same fraction of their window."""
    h = amps(server_factory, fairness_model=model)
    c1, l1 = connect("1.2", handle=h)
    c2, l2 = connect("1.2", handle=h)
    subscribe(c1, l1, "/queue/amps.fair", "s1", **{"activemq.prefetchSize": "6"})
    subscribe(c2, l2, "/queue/amps.fair", "s2", **{"activemq.prefetchSize": "2"})
    send_bodies(c1, "/queue/amps.fair", "0123", l1)
    h.wait_stats("amps.fair", "deliveringCount", 4)
    wait_total([l1, l2], 4)
    assert (len(l1.messages), len(l2.messages)) == expected


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_max_deliveries_nacked_message_lands_on_dlq_with_reason_header(
    server_factory: Callable[..., ServerHandle], connect: Connect, version: str
) -> None:
    h = amps(server_factory, max_deliveries=2)
    conn, lst = connect(version, handle=h)
    subscribe(conn, lst, "/queue/amps.md", "s")
    send_bodies(conn, "/queue/amps.md", "A", lst, color="red")
    nack(conn, version, lst.wait_messages(1)[0])
    second = lst.wait_messages(2)[1]
    assert second.headers["jmspy-delivery-count"] == "2"
    nack(conn, version, second)  # delivered twice: dead-lettered instead of returned
    h.wait_stats("amps.md", "deadLettered", 1)
    assert h.stats("amps.md")["messageCount"] == 0
    assert len(settle(lst, 2)) == 2
    (dead,) = dead_letters(h, connect, 1)
    assert dead.body == "A" and dead.headers["color"] == "red"
    assert dead.headers[DLQ_REASON] == "max deliveries (2) exceeded"
    assert dead.headers[ORIGINAL] == "amps.md"


def test_max_cancels_nack_and_abort_count_message_lands_on_dlq_with_reason_header(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    h = amps(server_factory, max_cancels=2, max_delivery_attempts=0)
    conn, lst = connect("1.2", handle=h)
    subscribe(conn, lst, "/queue/amps.mc", "s")
    send_bodies(conn, "/queue/amps.mc", "A", lst)
    nack(conn, "1.2", lst.wait_messages(1)[0])  # cancel 1
    second = lst.wait_messages(2)[1]
    tx = conn.begin()
    ack(conn, "1.2", second, transaction=tx)
    conn.abort(tx)  # a rollback is a cancel too: cancel 2
    h.wait_stats("amps.mc", "deadLettered", 1)
    assert len(settle(lst, 2)) == 2
    (dead,) = dead_letters(h, connect, 1)
    assert dead.headers[DLQ_REASON] == "max cancels (2) exceeded"


@pytest.mark.parametrize("settings", [{}, {"fairness_model": "fast"}], ids=["plain", "amps"])
def test_priority_header_higher_first_fifo_among_equals(
    server_factory: Callable[..., ServerHandle], connect: Connect, settings: dict[str, Any]
) -> None:
    h = amps(server_factory, **settings)
    conn, lst = connect("1.2", handle=h)
    for body, prio in [("l1", 1), ("h1", 9), ("m1", 4), ("h2", 9), ("l2", 1), ("d", None)]:
        conn.send("/queue/amps.prio", body, headers={} if prio is None else {"priority": prio})
    sync(conn, lst)
    subscribe(conn, lst, "/queue/amps.prio", "s", "auto")
    got = settle(lst, 6)
    assert bodies_of(got) == ["h1", "h2", "m1", "d", "l1", "l2"]  # no header: 4
    assert [f.headers["priority"] for f in got] == ["9", "9", "4", "4", "1", "1"]


def test_barrier_expression_waits_for_earlier_acks_then_goes_to_every_subscriber(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    h = amps(server_factory, barrier_expression="sync IS NOT NULL")
    c1, l1 = connect("1.2", handle=h)
    c2, l2 = connect("1.2", handle=h)
    subscribe(c1, l1, "/queue/amps.bar", "s1")
    subscribe(c2, l2, "/queue/amps.bar", "s2")
    c1.send("/queue/amps.bar", "A")
    c1.send("/queue/amps.bar", "B")
    c1.send("/queue/amps.bar", "SYNC", headers={"sync": "1"})
    send_bodies(c1, "/queue/amps.bar", "C", l1)
    (a,), (b,) = settle(l1, 1), settle(l2, 1)  # SYNC and C are held
    assert (a.body, b.body) == ("A", "B")
    ack(c1, "1.2", a, receipt="a")
    l1.wait_receipt("a")
    time.sleep(0.05)
    assert len(l1.messages) == 1 and len(l2.messages) == 1  # B still unacknowledged
    ack(c2, "1.2", b)
    h.wait_stats("amps.bar", "deliveringCount", 3)  # SYNC to each subscriber, C to one
    wait_total([l1, l2], 5)
    got1, got2 = list(l1.messages)[1:], list(l2.messages)[1:]
    assert bodies_of(got1)[:1] == ["SYNC"] and bodies_of(got2)[:1] == ["SYNC"]
    assert sorted(bodies_of(got1[1:] + got2[1:])) == ["C"]  # then the rest, once
    for conn, lst, got in ((c1, l1, got1), (c2, l2, got2)):
        for f in got:
            ack(conn, "1.2", f)
        sync(conn, lst)
    st = h.stats("amps.bar")
    assert (st["messageCount"], st["deliveringCount"]) == (0, 0)


def test_target_queue_depth_only_oldest_n_messages_are_deliverable(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    h = amps(server_factory, target_queue_depth=1000)
    conn, lst = connect("1.2", handle=h)
    for i in range(1000):
        conn.send("/queue/amps.tqd", f"r{i}", headers={"color": "red"})
    send_bodies(conn, "/queue/amps.tqd", ["blue"], lst, color="blue")
    blue, bl = connect("1.2", handle=h)
    subscribe(blue, bl, "/queue/amps.tqd", "b", selector="color = 'blue'")
    time.sleep(0.05)
    assert bl.messages == []  # a match exists, but outside the active 1000
    red, rl = connect("1.2", handle=h)
    subscribe(red, rl, "/queue/amps.tqd", "r", selector="color = 'red'",
              **{"activemq.prefetchSize": "1"})
    (r0,) = settle(rl, 1)
    assert r0.body == "r0" and bl.messages == []  # in delivery still uses up the target
    ack(red, "1.2", r0)
    assert bodies_of(bl.wait_messages(1)) == ["blue"]


# ------------------------------------------------------------------ consumerFlowLimit, scheduled


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
    server_factory: Callable[..., ServerHandle], connect: Connect, header: str, client: int,
    destination: int, effective: int,
) -> None:
    h = server_factory(settings={"limited.#": AddressSettings(consumer_flow_limit=destination)})
    conn, lst = connect("1.2", handle=h)
    send_bodies(conn, "/queue/limited.q", [f"m{i}" for i in range(20)], lst)
    # threshold 100 %: every ACK tops the window up at once (as activemq.prefetchSize does)
    extra = {"jmspy-flow-threshold": "100"} if header == "jmspy-flow-limit" else {}
    subscribe(conn, lst, "/queue/limited.q", "s", **{header: str(client)}, **extra)
    got = settle(lst, effective)
    assert h.stats("limited.q")["deliveringCount"] == effective
    ack(conn, "1.2", got[0])  # one slot frees: exactly one more, never above the limit
    assert len(settle(lst, effective + 1)) == effective + 1
    assert h.stats("limited.q")["deliveringCount"] == effective


@pytest.mark.parametrize(("version", "header"),
                         [("1.1", "AMQ_SCHEDULED_DELAY"), ("1.2", "jmspy-delivery-delay")])
def test_scheduled_delivery_header_counts_scheduled_then_delivers_after_delay(
    server_factory: Callable[..., ServerHandle], connect: Connect, version: str, header: str
) -> None:
    h = server_factory()
    conn, lst = connect(version, handle=h)
    subscribe(conn, lst, "/queue/sched", "s")
    started = time.monotonic()
    send_bodies(conn, "/queue/sched", ["later"], lst, **{header: "200"})
    st = h.stats("sched")
    assert (st["messageCount"], st["scheduledCount"], st["deliveringCount"]) == (1, 1, 0)
    assert lst.messages == []
    (m,) = lst.wait_messages(1, timeout=1.5)
    assert time.monotonic() - started >= 0.19
    assert m.body == "later"
    st = h.stats("sched")
    assert (st["messageCount"], st["scheduledCount"], st["deliveringCount"]) == (1, 0, 1)
