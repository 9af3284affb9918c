"""Producer and consumer worker processes for the broker benchmarks (parts b, c, d).

``python -m benchmarks.workers '<json spec>'``; roles:

* ``stomp-producer`` / ``stomp-consumer``: raw stomp.py (the baseline client);
* ``jmspy-producer`` / ``jmspy-consumer``: jmspy over any URL (stomp://, mqtt://);
* ``paho-producer`` / ``paho-consumer``: raw paho-mqtt, QoS 1.

Every message carries its send time (CLOCK_MONOTONIC) in a header / property / the first
bytes of the MQTT payload; consumers report p50/p99 of receive minus send time, the time
of the last receive and the count. A consumer prints READY once subscribed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .common import BODY, Spec, latency_metrics, now, signal_ready, worker_main

# spec keys: host, port, dest, count, timeout, and per role: version (1.1/1.2), vhost, ack
# (auto/client/client-individual), window, receipts (bool), url, ack_mode, qos, inflight,
# persistent (jmspy producers: False sends NON_PERSISTENT, like a raw STOMP SEND), tls
# (raw clients over TLS, benchmarks/tls.py: {"ca": PEM, "cert": PEM or None, "key": ...}).


class _Sink:
    """Counts deliveries, records latencies, sets ``done`` at ``count``."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.got = 0
        self.latencies: list[float] = []
        self.t_last = 0.0
        self.done = threading.Event()

    def hit(self, sent: float | None) -> None:
        t = now()
        if sent is not None:
            self.latencies.append(t - sent)
        self.got += 1
        if self.got >= self.count:
            self.t_last = t
            self.done.set()

    def result(self, timeout: float, stall: float = 20.0) -> dict[str, Any]:
        """Wait for all messages; give up after ``timeout`` or ``stall`` s without one."""
        deadline, seen, last_change = now() + timeout, -1, now()
        while not self.done.wait(0.5):
            if self.got != seen:
                seen, last_change = self.got, now()
            if now() > deadline or now() - last_change > stall:
                return {"error": f"stalled: received {self.got}/{self.count} "
                                 f"(nothing for {now() - last_change:.0f}s)"}
        return {"count": self.got, "t_last": self.t_last, **latency_metrics(self.latencies)}


# -- raw stomp.py ------------------------------------------------------------------------
def _stomp_connect(spec: Spec, listener: Any) -> Any:
    import stomp

    cls = stomp.Connection11 if spec.get("version") == "1.1" else stomp.Connection12
    conn = cls([(spec["host"], spec["port"])], heartbeats=(0, 0), vhost=spec.get("vhost"),
               auto_content_length=True)
    conn.set_listener("bench", listener)
    tls = spec.get("tls")
    if tls:  # stomp.py's own TLS (benchmarks/tls.py): its set_ssl, verifying the broker
        conn.set_ssl(for_hosts=[(spec["host"], spec["port"])], ca_certs=tls["ca"],
                     cert_file=tls.get("cert"), key_file=tls.get("key"))
    conn.connect(wait=True)
    return conn


def stomp_producer(spec: Spec) -> dict[str, Any]:
    import stomp

    receipts = bool(spec.get("receipts"))
    got = threading.Semaphore(0)

    class Receipts(stomp.ConnectionListener):  # type: ignore[misc]
        def on_receipt(self, frame: Any) -> None:
            got.release()

    conn = _stomp_connect(spec, Receipts())
    t_start = now()
    for i in range(spec["count"]):
        headers = {"ts": repr(now())}
        if spec.get("persistent"):  # the broker's store, not its memory
            headers["persistent"] = "true"
        if receipts:  # CoilMQ: one frame in flight at a time (PEERS.md)
            headers["receipt"] = f"r{i}"
        conn.send(destination=spec["dest"], body=BODY, headers=headers)
        if receipts and not got.acquire(timeout=spec.get("timeout", 60)):
            return {"error": f"no RECEIPT for SEND {i}"}
    t_end = now()  # with receipts: the last one came back
    conn.disconnect()
    if spec.get("tls"):
        # Over TLS stomp.py writes from a queue on its I/O thread, and disconnect() does
        # not wait: exiting now dropped the last SENDs still queued (a tenth of them).
        # The DISCONNECT's receipt comes after every SEND queued before it.
        deadline = now() + spec.get("timeout", 60)
        while conn.is_connected() and now() < deadline:
            time.sleep(0.01)  # the receipt that ends the connection
        if conn.is_connected():
            return {"error": "no RECEIPT for DISCONNECT"}
    return {"t_start": t_start, "t_end": t_end}


def stomp_consumer(spec: Spec) -> dict[str, Any]:
    import stomp

    sink = _Sink(spec["count"])
    ack = spec.get("ack", "auto")
    v12 = spec.get("version") != "1.1"
    holder: dict[str, Any] = {}

    class Consumer(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            h = frame.headers
            ts = h.get("ts")
            if ack != "auto":  # 1.2: ack(id[, transaction]); 1.1: ack(id, subscription)
                if v12:
                    holder["conn"].ack(h["ack"])
                else:
                    holder["conn"].ack(h["message-id"], h.get("subscription"))
            sink.hit(float(ts) if ts else None)

    conn = _stomp_connect(spec, Consumer())
    holder["conn"] = conn
    window = str(spec.get("window", 1000))
    conn.subscribe(destination=spec["dest"], id="1", ack=ack,
                   headers={"activemq.prefetchSize": window, "prefetch-count": window})
    signal_ready()
    result = sink.result(spec.get("timeout", 120))
    conn.disconnect()
    return result


# -- jmspy -------------------------------------------------------------------------------
def _jmspy_session(spec: Spec, ack_mode: int | None = None) -> tuple[Any, Any, Any]:
    from jmspy import ConnectionFactory, Session

    props = {"imqConsumerFlowLimit": int(spec.get("window", 1000))}
    conn = ConnectionFactory(spec["url"], **props).create_connection()
    mode = ack_mode if ack_mode is not None else getattr(Session, spec.get("ack_mode",
                                                                           "AUTO_ACKNOWLEDGE"))
    session = conn.create_session(ack_mode=mode)
    dest = (session.create_topic(spec["dest"]) if spec.get("topic")
            else session.create_queue(spec["dest"]))
    return conn, session, dest


def jmspy_producer(spec: Spec) -> dict[str, Any]:
    from jmspy import DeliveryMode, Session

    conn, session, dest = _jmspy_session(spec, Session.AUTO_ACKNOWLEDGE)
    producer = session.create_producer(dest)
    if spec.get("persistent") is False:  # JMS defaults to PERSISTENT; raw STOMP does not
        producer.delivery_mode = DeliveryMode.NON_PERSISTENT
    t_start = now()
    for _ in range(spec["count"]):
        producer.send(session.create_text_message(BODY, {"ts": now()}))
    conn.close()
    return {"t_start": t_start}


def jmspy_consumer(spec: Spec) -> dict[str, Any]:
    conn, session, dest = _jmspy_session(spec)
    sink = _Sink(spec["count"])
    ack = spec.get("ack_mode", "AUTO_ACKNOWLEDGE") in ("CLIENT_ACKNOWLEDGE",
                                                        "INDIVIDUAL_ACKNOWLEDGE")

    def on_message(message: Any) -> None:
        ts = message.get_property("ts") if message.property_exists("ts") else None
        if ack:
            message.acknowledge()
        sink.hit(float(ts) if ts is not None else None)

    consumer = session.create_consumer(dest)
    consumer.set_message_listener(on_message)
    conn.start()
    signal_ready()
    result = sink.result(spec.get("timeout", 120))
    conn.close()
    return result


# -- raw paho-mqtt -----------------------------------------------------------------------
def _paho(spec: Spec, name: str) -> Any:
    import paho.mqtt.client as mqtt

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name,
                         protocol=mqtt.MQTTv311, clean_session=True)
    client.max_inflight_messages_set(int(spec.get("inflight", 20)))
    client.max_queued_messages_set(0)
    return client


def paho_publish(client: Any, spec: Spec, payload: Callable[[], bytes], *, qos: int,
                 sync: bool = False) -> dict[str, Any]:
    """Start the connected ``client``'s network loop, publish ``spec["count"]`` payloads
    to ``spec["dest"]`` (each one awaited if ``sync``, else only the last), then
    disconnect; the run's ``t_start`` (also part_d_mqtt's paho producer)."""
    client.loop_start()
    timeout = spec.get("timeout", 120)
    t_start = now()
    info = None
    for _ in range(spec["count"]):
        info = client.publish(spec["dest"], payload(), qos=qos)
        if sync:
            info.wait_for_publish(timeout)
    if info is not None:
        info.wait_for_publish(timeout)
    client.disconnect()
    client.loop_stop()
    return {"t_start": t_start}


def paho_producer(spec: Spec) -> dict[str, Any]:
    client = _paho(spec, f"bench-pub-{spec['dest']}")
    client.connect(spec["host"], spec["port"])
    return paho_publish(client, spec, lambda: f"{now():.9f}".encode().ljust(100, b"x"),
                        qos=spec.get("qos", 1))


def paho_consumer(spec: Spec) -> dict[str, Any]:
    sink = _Sink(spec["count"])
    subscribed = threading.Event()
    client = _paho(spec, f"bench-sub-{spec['dest']}")
    client.on_subscribe = lambda *a: subscribed.set()
    client.on_message = lambda c, u, msg: sink.hit(float(msg.payload[:20].rstrip(b"x")))
    client.connect(spec["host"], spec["port"])
    client.subscribe(spec["dest"], qos=spec.get("qos", 1))
    client.loop_start()
    if not subscribed.wait(10):
        return {"error": "no SUBACK within 10s"}
    signal_ready()
    result = sink.result(spec.get("timeout", 120))
    client.disconnect()
    client.loop_stop()
    return result


ROLES = {
    "stomp-producer": stomp_producer,
    "stomp-consumer": stomp_consumer,
    "jmspy-producer": jmspy_producer,
    "jmspy-consumer": jmspy_consumer,
    "paho-producer": paho_producer,
    "paho-consumer": paho_consumer,
}

if __name__ == "__main__":
    worker_main(ROLES)
