"""The core's operator actions (core/admin.py): purge, delete and move one message, retry
dead letters, connections with their consumers' windows -- sans-I/O, on a fake clock."""

from __future__ import annotations

import pytest
from core_support import Recorder, msg

from jmspy.broker_ref.core import (
    AddressSettings,
    Broker,
    DestinationKind,
    DestinationNotFound,
    InvalidDestination,
    ServerConnection,
    admin,
)
from jmspy.broker_ref.core.api import ORIGINAL_DESTINATION
from jmspy.broker_ref.core.windows import ClientWindow

Q = DestinationKind.QUEUE


def _bodies(conn: ServerConnection, queue: str) -> list[object]:
    return [m.body for m in conn.browse(queue)]


def test_purge_removes_ready_messages_and_leaves_deliveries(
        broker: Broker, conn: ServerConnection) -> None:
    for i in range(4):
        conn.send(msg("q", i))
    conn.create_consumer(1, Q, "q", credit=1)  # one in delivery
    result = admin.purge(broker, "q")
    assert (result.removed, result.paged_left) == (3, 0)
    assert _bodies(conn, "q") == []
    stats = broker.stats("q")
    assert stats.message_count == 1 and stats.delivering_count == 1
    assert broker.usage()["memoryUsed"] == 0  # the purged ones gave their RAM back


def test_purge_unknown_queue(broker: Broker) -> None:
    with pytest.raises(DestinationNotFound, match="no queue named 'nope'"):
        admin.purge(broker, "nope")


def test_remove_one_message(broker: Broker, conn: ServerConnection) -> None:
    sent = [msg("q", i) for i in range(3)]
    for m in sent:
        conn.send(m)
    removed = admin.remove_message(broker, "q", sent[1].message_id)
    assert removed.body == 1
    assert _bodies(conn, "q") == [0, 2]
    with pytest.raises(admin.MessageNotFound, match="browse the queue"):
        admin.remove_message(broker, "q", sent[1].message_id)


def test_move_one_message(broker: Broker, conn: ServerConnection) -> None:
    m = msg("a", "x")
    conn.send(m)
    conn.send(msg("b", "y"))
    admin.move_message(broker, "a", m.message_id, "b")
    assert _bodies(conn, "a") == []
    assert _bodies(conn, "b") == ["y", "x"]
    assert broker.stats("b").enqueued == 2


def test_move_refusals_leave_the_message(broker: Broker, conn: ServerConnection) -> None:
    m = msg("a", "x")
    conn.send(m)
    with pytest.raises(DestinationNotFound, match="no queue named 'missing'"):
        admin.move_message(broker, "a", m.message_id, "missing")
    with pytest.raises(InvalidDestination, match="to itself"):
        admin.move_message(broker, "a", m.message_id, "a")
    assert _bodies(conn, "a") == ["x"]


def test_retry_dead_letters_back_to_their_origin(clock: object) -> None:
    broker = Broker(settings={"jobs": AddressSettings(max_delivery_attempts=1)})
    rec = Recorder()
    conn = broker.connect(rec)
    conn.send(msg("jobs", "work"))
    conn.send(msg("DLQ", "stray"))  # no origin: left where it is
    conn.create_consumer(1, Q, "jobs", credit=1)
    (delivery,) = rec.take()
    conn.cancel([delivery.delivery_tag])  # one attempt allowed: dead-lettered
    conn.close_consumer(1)
    dead = conn.browse("DLQ")
    assert [m.body for m in dead] == ["stray", "work"]
    assert dead[1].properties[ORIGINAL_DESTINATION] == "jobs"
    result = admin.retry_dead_letters(broker, "DLQ")
    assert list(result.moved.values()) == ["jobs"]
    assert result.skipped == [dead[0].message_id]
    assert _bodies(conn, "DLQ") == ["stray"]
    (back,) = conn.browse("jobs")
    assert back.body == "work" and ORIGINAL_DESTINATION not in back.properties


class _WindowKeeper(Recorder):
    """A host that keeps its consumers' windows (as the STOMP host does)."""

    def __init__(self, windows: dict[int, ClientWindow]) -> None:
        super().__init__()
        self.windows = windows

    def client_window(self, consumer_id: int) -> ClientWindow | None:
        return self.windows.get(consumer_id)


def test_connection_info_joins_the_window_the_host_keeps_for_its_client(
        clock: object) -> None:
    broker = Broker(settings={"limited": AddressSettings(consumer_flow_limit=4)})
    host = _WindowKeeper({1: ClientWindow(10, 50, 3, "jmspy-flow-limit"),
                          2: ClientWindow(3, 100, 0, "activemq.prefetchSize")})
    conn = broker.connect(host)
    conn.create_consumer(1, Q, "limited", credit=4)
    conn.create_consumer(2, Q, "limited", credit=3)
    conn.create_consumer(3, Q, "limited", credit=1)  # a window the host does not keep
    (info,) = admin.connection_info(broker)
    by_id = {w.consumer_id: w for w in info.consumers}
    # the destination's 4 is lower than the client's 10: the destination set the limit
    assert (by_id[1].limit, by_id[1].limit_set_by, by_id[1].client_limit) == (
        4, "destination", 10)
    assert (by_id[1].threshold, by_id[1].unconsumed, by_id[1].asked_by) == (
        50, 3, "jmspy-flow-limit")
    # the client's 3 is lower: the client set it
    assert (by_id[2].limit, by_id[2].limit_set_by, by_id[2].asked_by) == (
        3, "client", "activemq.prefetchSize")
    assert (by_id[3].limit, by_id[3].limit_set_by, by_id[3].client_limit,
            by_id[3].unconsumed) == (4, "destination", None, None)


def test_connection_info_shows_windows(clock: object) -> None:
    broker = Broker(settings={"limited": AddressSettings(consumer_flow_limit=2)})
    conn = broker.connect(Recorder(), client_id="c1", flow_limit=5)
    for i in range(3):
        conn.send(msg("limited", i))
    conn.create_consumer(7, Q, "limited", credit=10)
    (info,) = admin.connection_info(broker)
    assert (info.client_id, info.flow_limit) == ("c1", 5)
    (window,) = info.consumers
    assert window.consumer_id == 7 and window.queue == "limited"
    assert (window.delivering, window.limit, window.limit_set_by) == (2, 2, "destination")
    assert window.credit == 8
    assert admin.find_connection(broker, info.connection_id) is conn
    conn.close()
    assert admin.connection_info(broker) == []
    with pytest.raises(admin.ConnectionNotFound):
        admin.find_connection(broker, info.connection_id)
