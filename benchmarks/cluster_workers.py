"""Consumer and producer worker processes for the cluster benchmark (cluster_failover.py).

``python -m benchmarks.cluster_workers '<json spec>'``; roles:

* ``raw-consumer``: raw stomp.py with a host list (``hosts``: [[host, port], ...]),
  ``ack:client-individual`` with ``prefetch-count`` = ``window`` on ``/amq/queue/NAME``;
  when the connection is lost it connects again (stomp.py walks its host list in order)
  and subscribes again, as a raw stomp.py application has to.
* ``jmspy-consumer``: jmspy with an address list (``urls``), INDIVIDUAL_ACKNOWLEDGE,
  ``imqConsumerFlowLimit`` = ``window``, reconnecting along the list
  (``imqReconnectAttempts`` 1 per address and pass, ``imqReconnectInterval`` 100 ms).
* ``paced-producer``: raw stomp.py to one node, ``count`` persistent SENDs with the sequence
  number in the body, ``pace_s`` apart.

A consumer prints READY once subscribed and HALF after ``half`` messages (the benchmark
kills the node it is on then), and finishes once it has every sequence number; it
reports ``t_first_after``: the receive time (CLOCK_MONOTONIC) of the first message that
reached it over its new connection, ``t_last``, and the count of deliveries.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from .common import Spec, now, signal_ready, worker_main


class _Seen:
    """Distinct sequence numbers heard, the HALF signal, and the first message after a move."""

    def __init__(self, spec: Spec) -> None:
        self.count = int(spec["count"])
        self.half = int(spec.get("half", 0))
        self.seen: set[int] = set()
        self.deliveries = 0
        self.moved = False  # the consumer is on its new connection
        self.t_first_after = 0.0
        self.t_last = 0.0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def hit(self, body: str) -> None:
        t = now()
        with self._lock:
            self.deliveries += 1
            if self.moved and not self.t_first_after:
                self.t_first_after = t
            self.seen.add(int(body))
            if self.half and len(self.seen) == self.half:
                print("HALF", flush=True)
            if len(self.seen) >= self.count and not self.done.is_set():
                self.t_last = t
                self.done.set()

    def result(self, timeout: float) -> dict[str, Any]:
        if not self.done.wait(timeout):
            return {"error": f"received {len(self.seen)} of {self.count} distinct messages "
                             f"within {timeout:.0f}s"}
        if self.half and not self.t_first_after:
            return {"error": "no message arrived over a new connection (did the kill happen?)"}
        out = {"count": self.deliveries, "t_last": self.t_last}
        if self.t_first_after:
            out["t_first_after"] = self.t_first_after
        return out


def raw_consumer(spec: Spec) -> dict[str, Any]:
    import stomp

    seen = _Seen(spec)
    hosts = [tuple(h) for h in spec["hosts"]]
    window = str(spec.get("window", 1000))
    conn = stomp.Connection12(hosts, heartbeats=(0, 0), vhost="/",
                              reconnect_sleep_initial=0.05, reconnect_attempts_max=200)

    def subscribe() -> None:
        conn.subscribe(destination=spec["dest"], id="1", ack="client-individual",
                       headers={"prefetch-count": window})

    def reconnect() -> None:
        conn.connect("guest", "guest", wait=True)  # the transport walks the host list
        seen.moved = True  # frames from here on come over the new connection
        subscribe()

    class Consumer(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            conn.ack(frame.headers["ack"])
            seen.hit(frame.body)

        def on_disconnected(self) -> None:
            if not seen.done.is_set():  # a loss, not our own disconnect at the end
                threading.Thread(target=reconnect, daemon=True).start()

    conn.set_listener("bench", Consumer())
    conn.connect("guest", "guest", wait=True)
    subscribe()
    signal_ready()
    result = seen.result(spec.get("timeout", 120))
    conn.disconnect()
    return result


def jmspy_consumer(spec: Spec) -> dict[str, Any]:
    from jmspy import ConnectionFactory, Session

    seen = _Seen(spec)
    factory = ConnectionFactory(
        ",".join(spec["urls"]), imqConsumerFlowLimit=int(spec.get("window", 1000)),
        imqReconnectEnabled=True, imqReconnectAttempts=1, imqReconnectInterval=100,
        imqAddressListIterations=200)
    conn = factory.create_connection()
    first = conn.where

    session = conn.create_session(ack_mode=Session.INDIVIDUAL_ACKNOWLEDGE)
    consumer = session.create_consumer(session.create_queue(spec["dest"]))

    def on_message(message: Any) -> None:
        message.acknowledge()
        if seen.half and not seen.moved and conn.where != first:
            seen.moved = True  # delivered over the connection to another node
        seen.hit(message.text)

    consumer.set_message_listener(on_message)
    conn.start()
    signal_ready()
    result = seen.result(spec.get("timeout", 120))
    conn.close()
    return result


def paced_producer(spec: Spec) -> dict[str, Any]:
    """The last SEND carries a receipt, awaited before the DISCONNECT: RabbitMQ receipts
    a SEND once the queue confirmed it, in order, so every message is then stored (a
    DISCONNECT's own receipt does not wait for confirms: unconfirmed messages of a
    quorum queue are dropped with the channel)."""
    import stomp

    confirmed = threading.Event()

    class Receipt(stomp.ConnectionListener):  # type: ignore[misc]
        def on_receipt(self, frame: Any) -> None:
            if frame.headers.get("receipt-id") == "last":
                confirmed.set()

    conn = stomp.Connection12([tuple(spec["host"])], heartbeats=(0, 0), vhost="/")
    conn.set_listener("receipt", Receipt())
    conn.connect("guest", "guest", wait=True)
    pace = float(spec.get("pace_s", 0.0))
    count = int(spec["count"])
    t_start = now()
    for i in range(count):
        headers = {"persistent": "true", "content-type": "text/plain"}
        if i == count - 1:
            headers["receipt"] = "last"
        conn.send(destination=spec["dest"], body=str(i), headers=headers)
        if pace:
            time.sleep(pace)  # messages keep flowing while the node is killed
    if not confirmed.wait(spec.get("timeout", 120)):
        return {"error": f"no RECEIPT for the last of {count} SENDs"}
    conn.disconnect()
    return {"t_start": t_start}


ROLES = {
    "raw-consumer": raw_consumer,
    "jmspy-consumer": jmspy_consumer,
    "paced-producer": paced_producer,
}

if __name__ == "__main__":
    worker_main(ROLES)
