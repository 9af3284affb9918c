"""Issue 3 item 3: queue semantics over the wire — unmodified stomp.py (1.1 and 1.2) sending
real frames over loopback to the STOMP server, asserting on what the clients receive and on
the broker's counters (read on the server loop thread).

Every single-broker scenario (ring queues of seed 000, the AMPS-style settings of seed 001,
consumerFlowLimit, scheduled delivery) runs in memory on a fake clock in
test_queue_semantics_pair.py, with exact order and counts. What stays here needs real
concurrent connections: producers on several sockets racing into one ring queue, each
served by the server loop as its bytes arrive, while a sampler reads the queue depth.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

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


def bodies_of(frames: list[Any]) -> list[str]:
    return [f.body for f in frames]


def settle(lst: Collector, n: int, quiet: float = 0.05) -> list[Any]:
    """Wait for ``n`` messages, then make sure no more arrive for ``quiet`` seconds."""
    lst.wait_messages(n)
    # waits for a message beyond the n-th that must not come (a socket has no "nothing more")
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
            # one sampling period before reading the depth again (leaves the server loop
            # to the producers' frames meanwhile)
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
