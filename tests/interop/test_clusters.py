"""The cluster fixtures themselves (clusters.py): the RabbitMQ cluster forms with three
running nodes that share queues, a quorum queue keeps its messages when its leader's node
is killed, and the ActiveMQ slave takes over the shared store when the master is killed.

Raw stomp.py only, so that these prove the fixtures, not jmspy. The quorum queues are
addressed as ``/amq/queue/NAME`` (use the declared queue): ``/queue/NAME`` would
re-declare it as a classic queue, which RabbitMQ refuses. A killed node or master is
started again by the next test's fixture (``heal``).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import stomp
from clusters import ActiveMQPair, RabbitCluster, stomp_send

WAIT = 60.0  # seconds a bounded wait allows before it fails with what it saw


class _Collect(stomp.ConnectionListener):
    """Bodies of the MESSAGE frames heard (each acknowledged), and an event once ``want``
    distinct ones arrived."""

    def __init__(self, want: int) -> None:
        self.conn: stomp.Connection12 | None = None
        self.want = want
        self.bodies: list[str] = []
        self.done = threading.Event()

    def on_message(self, frame: Any) -> None:
        self.bodies.append(frame.body)
        assert self.conn is not None
        self.conn.ack(frame.headers["ack"])
        if len(set(self.bodies)) >= self.want:
            self.done.set()


def _connect(host: tuple[str, int], listener: stomp.ConnectionListener | None = None,
             ) -> stomp.Connection12:
    conn = stomp.Connection12([host], vhost="/", heartbeats=(0, 0))
    if listener is not None:
        conn.set_listener("collect", listener)
    conn.connect("guest", "guest", wait=True)
    return conn


def _drain(host: tuple[str, int], dest: str, want: list[str]) -> list[str]:
    heard = _Collect(len(want))
    conn = _connect(host, heard)
    heard.conn = conn
    try:
        # client-individual with a prefetch: RabbitMQ 3.10 gives an ack:auto STOMP
        # consumer of a quorum queue on a follower's node one message, then nothing
        conn.subscribe(dest, id="drain", ack="client-individual",
                       headers={"prefetch-count": "100"})
        assert heard.done.wait(WAIT), (
            f"{len(set(heard.bodies))} of {len(want)} messages arrived within {WAIT:.0f}s; "
            f"missing: {sorted(set(want) - set(heard.bodies))[:10]}")
    finally:
        conn.disconnect()
    return heard.bodies


def test_rabbit_cluster_has_three_running_nodes_sharing_queues(
        rabbit_cluster: RabbitCluster) -> None:
    want = sorted(n.node for n in rabbit_cluster.nodes)
    for node in rabbit_cluster.nodes:  # every node sees the other two running
        assert rabbit_cluster.running_nodes(node) == want
    name = f"cl-shared-{uuid.uuid4().hex[:8]}"
    rabbit_cluster.declare_quorum_queue(name)
    bodies = [f"m{i}" for i in range(20)]
    a, _, c = rabbit_cluster.nodes
    stomp_send(a.stomp_address, f"/amq/queue/{name}", bodies)  # sent on one node, read on another
    assert sorted(set(_drain(c.stomp_address, f"/amq/queue/{name}", bodies))) == sorted(bodies)


def test_quorum_queue_keeps_messages_when_its_leaders_node_is_killed(
        rabbit_cluster: RabbitCluster) -> None:
    name = f"cl-leader-{uuid.uuid4().hex[:8]}"
    first = rabbit_cluster.nodes[0]
    rabbit_cluster.declare_quorum_queue(name, first)
    assert rabbit_cluster.queue_leader(name) == first.node  # declared there: led there
    bodies = [f"m{i}" for i in range(50)]
    stomp_send(first.stomp_address, f"/amq/queue/{name}", bodies)
    rabbit_cluster.kill(first)
    assert not first.running
    survivor = rabbit_cluster.nodes[1]
    assert first.node not in rabbit_cluster.running_nodes(survivor)
    got = _drain(survivor.stomp_address, f"/amq/queue/{name}", bodies)
    assert sorted(set(got)) == sorted(bodies)
    assert rabbit_cluster.queue_leader(name) != first.node
    rabbit_cluster.restart(first)  # rejoins with its Mnesia: three running again
    assert rabbit_cluster.running_nodes(first) == sorted(n.node for n in rabbit_cluster.nodes)


def test_activemq_slave_takes_over_the_store_when_the_master_is_killed(
        activemq_pair: ActiveMQPair) -> None:
    master = activemq_pair.wait_master()
    slave = next(b for b in activemq_pair.brokers if b is not master)
    assert slave.running and not slave.serving  # waiting for the KahaDB lock
    name = f"/queue/cl-pair-{uuid.uuid4().hex[:8]}"
    bodies = [f"m{i}" for i in range(50)]
    assert master.stomp_port is not None
    stomp_send(("127.0.0.1", master.stomp_port), name, bodies)
    master.kill()
    assert activemq_pair.wait_master() is slave
    assert slave.stomp_port is not None
    got = _drain(("127.0.0.1", slave.stomp_port), name, bodies)
    assert sorted(set(got)) == sorted(bodies)  # the store came along
