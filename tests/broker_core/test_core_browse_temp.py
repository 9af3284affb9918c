"""Browsing and temporary queues."""

from __future__ import annotations

import pytest
from core_support import Recorder, msg

from jmspy.broker_ref.core import (
    TEMP_PREFIX,
    AccessDenied,
    AddressSettings,
    Broker,
    DestinationKind,
    DestinationNotFound,
    IllegalBrokerState,
    ServerConnection,
)

Q = DestinationKind.QUEUE


def test_browse_snapshot_order_no_state_change(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    conn.send(msg("q", "low", priority=1))
    conn.send(msg("q", "high", priority=8))
    conn.send(msg("q", "mid"))
    before = broker.stats("q")
    assert [m.body for m in conn.browse("q")] == ["high", "mid", "low"]
    assert broker.stats("q") == before
    conn.create_consumer(1, Q, "q", credit=1)
    assert [m.body for m in conn.browse("q")] == ["mid", "low"]  # in delivery: not shown


def test_browse_missing_queue(clock: object) -> None:
    b = Broker(settings={"strict": AddressSettings(auto_create=False)})
    c = b.connect(Recorder())
    assert c.browse("nothing-yet") == []
    assert b.queue_names() == []  # browsing does not create
    with pytest.raises(DestinationNotFound):
        c.browse("strict")


def test_temp_queue_naming_and_access(broker: Broker, rec: Recorder) -> None:
    owner = broker.connect(rec)
    other_rec = Recorder()
    other = broker.connect(other_rec)
    t1, t2 = owner.create_temporary_queue(), owner.create_temporary_queue()
    assert t1.startswith(TEMP_PREFIX) and t1 != t2
    assert t1 == f"{TEMP_PREFIX}{owner.connection_id}-1"
    with pytest.raises(AccessDenied):
        other.create_consumer(1, Q, t1)
    with pytest.raises(AccessDenied):
        other.delete_temporary_queue(t1)
    other.send(msg(t1, "reply"))  # anyone may send to it
    owner.create_consumer(1, Q, t1, credit=1)
    assert rec.bodies() == ["reply"]
    with pytest.raises(IllegalBrokerState, match="consumers"):
        owner.delete_temporary_queue(t1)
    owner.delete_temporary_queue(t2)
    assert t2 not in broker.queue_names()


def test_temp_queue_deleted_on_close(broker: Broker) -> None:
    owner = broker.connect(Recorder())
    other = broker.connect(Recorder())
    t = owner.create_temporary_queue()
    owner.close()
    with pytest.raises(DestinationNotFound, match="does not exist"):
        other.send(msg(t, "late"))
    with pytest.raises(DestinationNotFound):
        other.create_consumer(1, Q, t)
