"""Duplicate detection (Artemis's id cache): a message whose ``_AMQ_DUPL_ID`` its address
saw among its last ``duplicate-id-cache-size`` ids is dropped -- also inside a transaction,
whose other sends still commit -- so a producer that sends again after a failure (a
retried Spark task) puts each message in once."""

from __future__ import annotations

from typing import Any

from core_support import Recorder, msg, tmsg

from jmspy.broker_ref.core import Broker, DestinationKind
from jmspy.broker_ref.core.api import AddressSettings
from jmspy.broker_ref.core.duplicates import DUPLICATE_ID


def dup(dest: str, dup_id: str, **kw: Any) -> Any:
    return msg(dest, dup_id, properties={DUPLICATE_ID: dup_id}, **kw)


def test_a_second_message_with_the_same_duplicate_id_is_dropped() -> None:
    b = Broker()
    c = b.connect(Recorder())
    for dup_id in ("a", "b", "a", "c", "b"):
        c.send(dup("q", dup_id))
    c.send(msg("q", "no id"))
    c.send(msg("q", "no id"))  # messages without an id are never duplicates
    assert b.stats("q").message_count == 5
    assert b.post_office.duplicates.dropped == {"q": 2}


def test_the_cache_keeps_the_last_n_ids_per_address_and_zero_turns_it_off() -> None:
    b = Broker(settings={"small": AddressSettings(duplicate_id_cache_size=2),
                         "off": AddressSettings(duplicate_id_cache_size=0)})
    c = b.connect(Recorder())
    for dup_id in ("a", "b", "c", "a", "c"):  # "a" fell out of a cache of 2; "c" did not
        c.send(dup("small", dup_id))
    assert b.stats("small").message_count == 4
    for _ in range(3):
        c.send(dup("off", "x"))
    assert b.stats("off").message_count == 3
    c.send(dup("other", "a"))  # another address has its own cache
    assert b.stats("other").message_count == 1


def test_a_transaction_drops_its_duplicates_and_commits_the_rest() -> None:
    b = Broker()
    c = b.connect(Recorder())
    c.send(dup("q", "1"))
    c.begin("tx")
    for dup_id in ("1", "2", "3"):
        c.send(dup("q", dup_id), "tx")
    c.commit("tx")
    assert b.stats("q").message_count == 3  # 1 (first send), 2, 3
    c.begin("retry")  # a retried task sends the same again: nothing new, commit succeeds
    for dup_id in ("1", "2", "3"):
        c.send(dup("q", dup_id), "retry")
    c.commit("retry")
    assert b.stats("q").message_count == 3


def test_topics_detect_duplicates_by_topic_name() -> None:
    b = Broker()
    rec = Recorder()
    c = b.connect(rec)
    c.create_consumer(1, DestinationKind.TOPIC, "prices", credit=10)
    for dup_id in ("x", "x", "y"):
        c.send(tmsg("prices", dup_id, properties={DUPLICATE_ID: dup_id}))
    assert rec.bodies() == ["x", "y"]
