"""The per-message loops of settling a batch of queued acknowledgements, as twins.

Client side (``jmspy/_pure/dispatch.py`` and its compiled twin): ``take_held`` pops what
the dispatcher queued, ``held_tags`` lists their delivery tags, ``consumed_counts`` says
how many each consumer delivered (skipping tags a dropped connection killed). Broker side
(``jmspy/broker_ref/core/queue_run.py`` and its twin): ``tags_known_once`` decides whether
a run of acknowledgements may be settled without a per-tag check. Both twins must give the
answer of a plain model, on random input, whatever order and repeats it has.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

import jmspy._cext.dispatch as cext_dispatch
import jmspy._cext.queue_run as cext_queue_run
import jmspy._pure.dispatch as pure_dispatch
import jmspy.broker_ref.core.queue_run as pure_queue_run

DISPATCH = pytest.mark.parametrize("twin", [pure_dispatch, cext_dispatch],
                                   ids=["pure", "compiled"])
QUEUE_RUN = pytest.mark.parametrize("twin", [pure_queue_run, cext_queue_run],
                                    ids=["pure", "compiled"])


class Consumer:
    """Hashable by identity, like MessageConsumer."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


CONSUMERS = [Consumer(n) for n in "abcd"]
held_items = st.lists(st.tuples(st.sampled_from(CONSUMERS), st.integers(1, 60)),
                      max_size=80)


def _model_counts(items: list[tuple[Any, int]], floor: int) -> list[tuple[Any, int]]:
    counts: dict[Any, int] = {}
    for consumer, tag in items:
        if tag > floor:
            counts[consumer] = counts.get(consumer, 0) + 1
    return list(counts.items())


@DISPATCH
@settings(max_examples=300, deadline=None)
@given(items=held_items, floor=st.sampled_from([0, 0, 10, 30, 100]))
def test_a_batch_gives_its_tags_in_order_and_each_consumers_count_in_first_seen_order(
    twin: Any, items: list[tuple[Any, int]], floor: int
) -> None:
    pending = deque(items)
    taken = twin.take_held(pending)
    assert taken == items and not pending
    assert twin.held_tags(taken) == [tag for _, tag in items]
    assert twin.consumed_counts(taken, floor) == _model_counts(items, floor)


@DISPATCH
def test_taking_the_batch_leaves_a_later_append_queued(twin: Any) -> None:
    a = CONSUMERS[0]
    pending = deque([(a, 1), (a, 2)])
    taken = twin.take_held(pending)
    pending.append((a, 3))
    assert taken == [(a, 1), (a, 2)] and list(pending) == [(a, 3)]
    assert twin.take_held(deque()) == [] and twin.consumed_counts([], 0) == []


@DISPATCH
def test_runs_of_one_consumer_split_by_another_are_summed(twin: Any) -> None:
    a, b = CONSUMERS[:2]
    items = [(a, 1), (a, 2), (b, 3), (a, 4), (b, 5), (b, 6), (a, 7)]
    assert twin.consumed_counts(items, 0) == [(a, 4), (b, 3)]
    assert twin.consumed_counts(items, 3) == [(a, 2), (b, 2)]  # 1-3 died with the link
    assert twin.consumed_counts(items, 7) == []


tag_runs = st.lists(st.integers(1, 40), max_size=40)


@QUEUE_RUN
@settings(max_examples=400, deadline=None)
@given(tags=tag_runs, known=st.sets(st.integers(1, 40)), staged=st.sets(st.integers(1, 40)),
       ordered=st.booleans())
def test_a_run_is_settled_whole_only_when_every_tag_is_known_once_and_none_staged(
    twin: Any, tags: list[int], known: set[int], staged: set[int], ordered: bool
) -> None:
    if ordered:  # the common case: acknowledged in delivery order (the compiled fast path)
        tags = sorted(set(tags))
    known_map = {t: object() for t in known}
    staged_map = {t: "tx-1" for t in staged}
    expected = (len(set(tags)) == len(tags) and all(t in known for t in tags)
                and not any(t in staged for t in tags))
    assert twin.tags_known_once(known_map, staged_map, tags) is expected


@QUEUE_RUN
@pytest.mark.parametrize(("tags", "ok"), [
    ([1, 2, 3], True),
    ([3, 1, 2], True),      # out of order, still each once
    ([1, 2, 2], False),     # listed twice, in order
    ([2, 1, 2], False),     # listed twice, out of order
    ([1, 9], False),        # 9 was never delivered
    ([4], False),           # 4 is staged in a transaction
    ([], True),
])
def test_repeats_unknown_and_staged_tags_are_each_refused(
    twin: Any, tags: list[int], ok: bool
) -> None:
    known = {t: object() for t in (1, 2, 3, 4)}
    assert twin.tags_known_once(known, {4: "tx-1"}, tags) is ok
