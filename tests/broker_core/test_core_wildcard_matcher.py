"""The wildcard matcher (issue 11, item 6): the same answers as the definition (checked by
hypothesis against a plain recursive matcher), and a cost linear in the name's words, even
for the adversarial patterns that made the old backtracking match take 24 s. The cost is
counted (word lookups), not timed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jmspy.broker_ref.core.settings import _Matcher, pattern_matches


def reference(pattern: list[str], words: list[str]) -> bool:
    """The definition: '*' is one word, '#'/'>' any number (exponential, for tiny cases)."""
    if not pattern:
        return not words
    head = pattern[0]
    if head in ("#", ">"):
        return reference(pattern[1:], words) or (bool(words) and reference(pattern, words[1:]))
    if not words:
        return False
    return (head == "*" or head == words[0]) and reference(pattern[1:], words[1:])


_word = st.sampled_from(["a", "b", "c", ""])
_pword = st.sampled_from(["a", "b", "*", "#", ">", ""])


@settings(max_examples=3000, deadline=None)
@given(pattern=st.lists(_pword, min_size=1, max_size=7), words=st.lists(_word, min_size=1,
                                                                      max_size=8))
def test_matcher_agrees_with_the_definition(pattern: list[str], words: list[str]) -> None:
    assert pattern_matches(".".join(pattern), ".".join(words)) == reference(pattern, words)


class CountingDict(dict[str, int]):
    lookups = 0

    def get(self, key: str, default: Any = None) -> Any:
        CountingDict.lookups += 1
        return super().get(key, default)


def cost(pattern: str, name: str) -> tuple[bool, int]:
    m = _Matcher(pattern)
    m._words = CountingDict(m._words)
    CountingDict.lookups = 0
    result = m.matches(name.split("."))
    return result, CountingDict.lookups


def test_issue_case_16000_word_topic_against_8000_word_pattern_costs_one_step_a_word() -> None:
    # backtracking retried the 7,998 literals from each of 16,000 positions (24 s)
    pattern = ".".join(["#"] + ["a"] * 7998 + ["b"])
    matched, steps = cost(pattern, ".".join(["a"] * 16_000))
    assert not matched and steps <= 16_000
    matched, steps = cost(pattern, ".".join(["a"] * 15_999 + ["b"]))
    assert matched and steps <= 16_000


def test_adversarial_patterns_cost_grows_linearly_with_the_name() -> None:
    patterns = [
        ".".join(["#", "x"] * 50),          # many multi-word wildcards between literals
        ".".join(["#"] + ["a"] * 98 + ["b"]),  # a literal run that almost matches anywhere
        ".".join(["*"] * 100) + ".#",       # a long run of single-word wildcards
        "#." + ".".join(["a"] * 100),       # a leading '#' before a long literal run
        ".".join(["#"] * 200) + ".z",       # '#.#.#...' (collapses to one '#')
        ".".join(["a", "#", "*"] * 60),
    ]
    for pattern in patterns:
        for n in (10, 100, 1000, 4000):
            name = ".".join(["a"] * (n - 1) + ["x"])
            matched, steps = cost(pattern, name)
            assert matched == reference_fast(pattern, name)
            assert steps <= n, (pattern[:30], n, steps)


def reference_fast(pattern: str, name: str) -> bool:
    """A memoised (quadratic, not exponential) form of the definition for long inputs."""
    p, w = pattern.split("."), name.split(".")
    memo: dict[tuple[int, int], bool] = {}
    for i in range(len(p), -1, -1):
        for j in range(len(w), -1, -1):
            if i == len(p):
                memo[i, j] = j == len(w)
            elif p[i] in ("#", ">"):
                memo[i, j] = memo[i + 1, j] or (j < len(w) and memo[i, j + 1])
            else:
                memo[i, j] = j < len(w) and (p[i] == "*" or p[i] == w[j]) and memo[i + 1, j + 1]
    return memo[0, 0]


# ---------------------------------------------------------------- max-destination-length

import pytest  # noqa: E402
from core_support import Recorder, msg, tmsg  # noqa: E402

from jmspy.broker_ref.core import Broker, DestinationKind, InvalidDestination  # noqa: E402


@pytest.mark.parametrize("limit", [1024, 40])
def test_names_over_max_destination_length_are_refused_before_any_routing(limit: int) -> None:
    broker = Broker(max_destination_length=limit)
    conn = broker.connect(Recorder(), client_id="c")
    conn.create_consumer(1, DestinationKind.TOPIC, "#")  # would see every topic routed
    fits, over = "a" * limit, "a" * (limit + 1)
    conn.send(msg(fits, 1))
    conn.send(tmsg(fits, 1))
    wide = "é" * (limit // 2 + 1)  # fewer characters than the limit, more UTF-8 bytes
    for name in (over, ".".join(["w"] * limit), wide):
        for make in (msg, tmsg):
            with pytest.raises(InvalidDestination, match=r"max-destination-length of \d+ "
                               r"bytes.*\[limits\] max-destination-length"):
                conn.send(make(name, 1))
        with pytest.raises(InvalidDestination, match="max-destination-length"):
            conn.create_consumer(2, DestinationKind.QUEUE, name)
        with pytest.raises(InvalidDestination, match="max-destination-length"):
            conn.create_consumer(2, DestinationKind.TOPIC, name)
    with pytest.raises(InvalidDestination, match="subscription name of"):
        conn.create_consumer(3, DestinationKind.TOPIC, "t", subscription_name=over,
                             durable=True)
    assert over not in broker.queue_names() and over not in broker.topic_names()
    assert broker.stats(fits).message_count == 1


def test_default_max_destination_length_is_1024_bytes_and_configurable() -> None:
    import tomllib

    from jmspy.broker_ref.config import ConfigError, parse_config

    def load(text: str) -> Any:
        return parse_config(tomllib.loads(text), "jmspy.toml")

    assert Broker().max_destination_length == 1024
    cfg = load("[limits]\nmax-destination-length = 64\n")
    assert Broker(**cfg.broker_kwargs()).max_destination_length == 64
    with pytest.raises(ConfigError, match=r"\[limits\] max-destination-length = 0 must be >= 1"):
        load("[limits]\nmax-destination-length = 0\n")
    with pytest.raises(ValueError, match="max_destination_length"):
        Broker(max_destination_length=0)
