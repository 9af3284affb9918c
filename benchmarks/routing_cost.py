"""Routing cost of hostile destination names (issue 11, item 6):
``python -m benchmarks.routing_cost``.

Prints, for the issue's case (a SEND to a 16,000-word topic while an 8,000-word wildcard
subscription ``#.a.a...a.b`` exists) and for a scaling series, the time of one match with
the old backtracking glob match (kept here, verbatim, as the "before") and with the
broker's word-linear matcher, plus the time the broker core spends routing that SEND with
the destination length limit raised out of the way, and what the default limit does with
it (an immediate refusal). Medians of several runs; times, so machine noise applies.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from jmspy.broker_ref.core import Broker, DestinationKind, InvalidDestination, ServerMessage
from jmspy.broker_ref.core.settings import pattern_matches

_MULTI = frozenset({"#", ">"})


def old_match(pattern: str, name: str) -> bool:
    """The matcher of main 3a24756 (backtracking over the last multi-word wildcard)."""
    pat, words = tuple(pattern.split(".")), tuple(name.split("."))
    p = w = 0
    star_p, star_w = -1, 0
    while w < len(words):
        if p < len(pat) and pat[p] in _MULTI:
            star_p, star_w = p, w
            p += 1
        elif p < len(pat) and (pat[p] == "*" or pat[p] == words[w]):
            p += 1
            w += 1
        elif star_p >= 0:
            star_w += 1
            w = star_w
            p = star_p + 1
        else:
            return False
    while p < len(pat) and pat[p] in _MULTI:
        p += 1
    return p == len(pat)


def adversarial(words: int) -> str:
    """'#' then literals that match almost everywhere, then one that never does: the
    backtracking match retries the whole literal run from every position."""
    return ".".join(["#"] + ["a"] * (words - 2) + ["b"])


def median_time(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class _Sink:
    def deliver(self, delivery: object) -> None:
        pass

    def consumer_closed(self, consumer_id: int, reason: str) -> None:
        pass


def core_send_time(pattern: str, topic: str, limit: int) -> str:
    broker = Broker(max_destination_length=limit)
    conn = broker.connect(_Sink())
    try:
        conn.create_consumer(1, DestinationKind.TOPIC, pattern, credit=10)
    except InvalidDestination as exc:
        return f"SUBSCRIBE refused: {str(exc)[:60]}..."
    message = ServerMessage("ID:1", DestinationKind.TOPIC, topic, body="x")
    start = time.perf_counter()
    try:
        conn.send(message)
    except InvalidDestination as exc:
        return f"SEND refused: {str(exc)[:60]}..."
    return f"{(time.perf_counter() - start) * 1000:.1f} ms"


def main() -> None:
    pattern = adversarial(8000)
    topic = ".".join(["a"] * 16_000)  # each start position matches 7,998 words, then fails
    print("issue case: 16,000-word topic vs 8,000-word pattern '#.a.a...a.b'")
    print(f"  old backtracking match : {median_time(lambda: old_match(pattern, topic), 1):9.3f} s")
    print(f"  new linear match       : "
          f"{median_time(lambda: pattern_matches(pattern, topic), 5) * 1000:9.3f} ms")
    print(f"  core SEND, limit 1 MB  : {core_send_time(pattern, topic, 1 << 20)}")
    print(f"  core SEND, default 1KiB: {core_send_time(pattern, topic, 1024)}")
    print("\nscaling (topic words = 2 x pattern words), median of 5:")
    print(f"  {'topic words':>11}  {'old ms':>10}  {'new ms':>8}  {'new us/word':>11}")
    for words in (500, 1000, 2000, 4000, 8000):
        pat = adversarial(words // 2)
        name = ".".join(["a"] * words)
        old = median_time(lambda p=pat, n=name: old_match(p, n), 3 if words <= 2000 else 1)  # slow
        new = median_time(lambda p=pat, n=name: pattern_matches(p, n), 5)
        print(f"  {words:>11}  {old * 1000:>10.1f}  {new * 1000:>8.3f}  "
              f"{new / words * 1e6:>11.3f}")


if __name__ == "__main__":
    main()
