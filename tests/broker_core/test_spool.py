"""The spool file (non-stored paged messages): per queue and level in order, taken once,
scanned without taking, gone with the broker -- even one that is never closed."""

from __future__ import annotations

import gc
from pathlib import Path

from jmspy.broker_ref.core import DestinationKind, ServerMessage
from jmspy.broker_ref.store.spool import Spool


def m(i: int) -> ServerMessage:
    return ServerMessage(f"id{i}", DestinationKind.QUEUE, "q", body=f"b{i}", persistent=False)


def test_messages_come_back_per_queue_and_level_in_order_once(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "temp")
    for i in range(10):
        spool.put("q" if i % 2 else "r", i % 3, m(i), i)
    assert [seq for seq, _, _ in spool.scan("q", 1, 0, 10)] != []  # scanning takes nothing
    got, removed = spool.take("q", 1, 10)
    assert [(x.message_id, n) for x, n in got] == [("id1", 1), ("id7", 7)] and removed == 2
    assert spool.take("q", 1, 10) == ([], 0)
    assert [x.message_id for x in spool.browse("r", 0)] == ["id0", "id6"]
    spool.delete_queue("r")
    assert list(spool.browse("r", 0)) == []
    spool.close()
    assert not (tmp_path / "temp" / "spool.sqlite").exists()


def test_a_spool_of_a_broker_never_closed_is_removed_when_it_goes() -> None:
    spool = Spool()
    spool.put("q", 0, m(1), 0)
    assert spool.path is not None
    directory = spool.path.parent
    assert directory.exists()
    del spool
    gc.collect()
    assert not directory.exists()
