"""(d) jmspy over MQTT (mqtt:// transport) vs raw paho-mqtt, both on Mosquitto, like for like.

Every pair uses the same protocol version, payload (100 B, the send time in its first
bytes) and consumer: a separate process subscribed at QoS 1 that acknowledges each message
itself (jmspy: AUTO_ACKNOWLEDGE, the PUBACK leaves once the listener returned; paho:
``manual_ack=True`` and ``client.ack`` after ``on_message``), with the same Receive Maximum
on MQTT 5. The consumer subscribes before the producer starts (MQTT topics keep nothing
for absent subscribers). What differs between the pairs is the producer:

* ``sync``: one QoS 1 PUBLISH at a time. jmspy: a PERSISTENT ``send()``, which returns once
  the broker's PUBACK is in (JMS: a persistent send is complete when the provider has it);
  paho: ``publish(qos=1)`` then ``wait_for_publish()`` for each message. Measured on MQTT 5
  and on 3.1.1.
* ``window``: ``WINDOW`` QoS 1 PUBLISHes in flight. jmspy: PERSISTENT ``send()`` with a
  CompletionListener (JMS 2 asynchronous send), the producer waits for the last completion;
  paho: ``max_inflight_messages_set(WINDOW)``, ``publish(qos=1)`` for each, then waits for
  the last PUBACK.

Goal: jmspy over paho in the same round >= 0.9x (issues 5 and 17).

The ``host`` rows turn it around: the same raw paho pair (MQTT 5) against the bundled
broker's MQTT host (``jmspy broker --mqtt-port``) and against Mosquitto, at QoS 0 and at
QoS 1 with ``WINDOW`` in flight (the consumer acknowledging each). Goal: the bundled
broker >= 0.8x Mosquitto's throughput on both (issue 51; Mosquitto is C, the host is
Python on the broker's event loop).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from .common import (
    Config,
    Goal,
    Progress,
    Row,
    Spec,
    now,
    run_interleaved,
    run_pair,
    signal_ready,
    worker_main,
)
from .peers import Peers
from .workers import _Sink as Sink
from .workers import paho_publish

WINDOW = 100  # PUBLISHes in flight in the ``window`` rows (paho's, jmspy's transport's)
RECEIVE_MAXIMUM = 1000  # the consumers' MQTT 5 Receive Maximum (jmspy's default flow limit)
SIZE = 100  # bytes of payload (jmspy: a TextMessage of that many ASCII characters)


def _payload() -> bytes:
    return f"{now():.9f}".encode().ljust(SIZE, b"x")


def _stamp(payload: bytes) -> float:
    return float(payload[:20].rstrip(b"x"))


# -- raw paho-mqtt -----------------------------------------------------------------------
def _paho(spec: Spec, name: str) -> Any:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    v5 = spec["version"] == "5"
    kwargs: dict[str, Any] = {} if v5 else {"clean_session": True}
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=name,
                         protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311, manual_ack=True,
                         **kwargs)
    client.max_inflight_messages_set(int(spec.get("inflight", WINDOW)))
    client.max_queued_messages_set(0)
    tls = spec.get("tls")
    if tls:  # paho's own TLS (benchmarks/tls.py): tls_set, verifying the broker
        client.tls_set(ca_certs=tls["ca"], certfile=tls.get("cert"), keyfile=tls.get("key"))
    return client


def _paho_connect(client: Any, spec: Spec) -> None:
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    if spec["version"] == "5":
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.ReceiveMaximum = RECEIVE_MAXIMUM
        client.connect(spec["host"], spec["port"], clean_start=True, properties=props)
    else:
        client.connect(spec["host"], spec["port"])


def paho_producer(spec: Spec) -> dict[str, Any]:
    client = _paho(spec, f"bench-pub-{spec['dest']}")
    _paho_connect(client, spec)
    return paho_publish(client, spec, _payload, qos=spec.get("qos", 1),
                        sync=spec["mode"] == "sync")


def paho_consumer(spec: Spec) -> dict[str, Any]:
    sink = Sink(spec["count"])
    subscribed = threading.Event()
    client = _paho(spec, f"bench-sub-{spec['dest']}")

    def on_message(c: Any, userdata: Any, msg: Any) -> None:
        stamp = _stamp(msg.payload)
        if msg.qos:
            c.ack(msg.mid, msg.qos)
        sink.hit(stamp)

    client.on_subscribe = lambda *a: subscribed.set()
    client.on_message = on_message
    _paho_connect(client, spec)
    client.subscribe(spec["dest"], qos=spec.get("qos", 1))
    client.loop_start()
    if not subscribed.wait(10):
        return {"error": "no SUBACK within 10s"}
    signal_ready()
    result = sink.result(spec.get("timeout", 120), spec.get("stall", 20.0))
    client.disconnect()
    client.loop_stop()
    return result


# -- jmspy -------------------------------------------------------------------------------
def _jmspy(spec: Spec) -> tuple[Any, Any, Any]:
    from jmspy import ConnectionFactory, Session

    conn = ConnectionFactory(spec["url"], imqConsumerFlowLimit=RECEIVE_MAXIMUM
                             ).create_connection()
    session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
    return conn, session, session.create_topic(spec["dest"])


def jmspy_producer(spec: Spec) -> dict[str, Any]:
    conn, session, dest = _jmspy(spec)
    producer = session.create_producer(dest)  # PERSISTENT by default: QoS 1
    count = spec["count"]
    done = threading.Event()
    completions = [0]
    errors: list[str] = []

    def completed(message: Any, error: Exception | None) -> None:
        if error is not None:
            errors.append(f"{type(error).__name__}: {error}")
        completions[0] += 1
        if completions[0] >= count:
            done.set()

    window = spec["mode"] == "window"
    t_start = now()
    for _ in range(count):
        message = session.create_text_message(_payload().decode())
        if window:
            producer.send(message, completion_listener=completed)
        else:
            producer.send(message)
    if window and not done.wait(spec.get("timeout", 120)):
        return {"error": f"{count - completions[0]} completions missing"}
    conn.close()
    return {"error": errors[0]} if errors else {"t_start": t_start}


def jmspy_consumer(spec: Spec) -> dict[str, Any]:
    conn, session, dest = _jmspy(spec)
    sink = Sink(spec["count"])
    consumer = session.create_consumer(dest)
    consumer.set_message_listener(lambda m: sink.hit(_stamp(m.text.encode())))
    conn.start()
    signal_ready()
    result = sink.result(spec.get("timeout", 120), spec.get("stall", 20.0))
    conn.close()
    return result


ROLES = {
    "paho-producer": paho_producer,
    "paho-consumer": paho_consumer,
    "jmspy-producer": jmspy_producer,
    "jmspy-consumer": jmspy_consumer,
}


# -- the part ------------------------------------------------------------------------------
def _runner(peers: Peers, client: str, mode: str, version: str, count: int) -> Any:
    def run(_rnd: int) -> dict[str, Any]:
        ep = peers.get("mosquitto")
        if isinstance(ep, str):
            return {"error": ep}
        base: Spec = {"host": ep.host, "port": ep.mqtt_port, "count": count, "timeout": 180,
                      "version": version, "mode": mode, "inflight": WINDOW,
                      "dest": f"bench/{uuid.uuid4().hex[:12]}"}
        if client == "jmspy":
            base["url"] = (f"mqtt://{ep.host}:{ep.mqtt_port}?version={version}")
            base["dest"] = base["dest"].replace("/", ".")
        return run_pair("part_d_mqtt", {**base, "role": f"{client}-consumer"},
                        {**base, "role": f"{client}-producer"})

    return run


def _host_runner(peers: Peers, broker: str, qos: int, count: int) -> Any:
    """The raw paho pair (MQTT 5) against ``broker`` (``mosquitto`` or ``jmspy-mqtt``)."""
    def run(_rnd: int) -> dict[str, Any]:
        ep = peers.get(broker)
        if isinstance(ep, str):
            return {"error": ep}
        spec: Spec = {"host": ep.host, "port": ep.mqtt_port, "count": count, "timeout": 180,
                      "version": "5", "mode": "window", "inflight": WINDOW, "qos": qos,
                      "dest": f"bench/{uuid.uuid4().hex[:12]}"}
        return run_pair("part_d_mqtt", {**spec, "role": "paho-consumer"},
                        {**spec, "role": "paho-producer"})

    return run


def host_configs(quick: bool, peers: Peers) -> list[Config]:
    """paho -> jmspy broker vs paho -> Mosquitto (see the module docstring)."""
    out: list[Config] = []
    for qos in (0, 1):
        count = 5_000 if quick else 50_000
        what = "QoS 0" if qos == 0 else f"QoS 1, {WINDOW} in flight"
        cfg = f"raw paho, MQTT 5, {what}, {count:,} msgs"
        key = f"d/host/qos{qos}"
        out.append(Config(Row("d", f"{key}/jmspy", "paho -> jmspy broker (MQTT host)", cfg,
                              baseline=f"{key}/mosquitto", short=f"host, {what}",
                              goals=[Goal(0.8, over=f"{key}/mosquitto", label="vs Mosquitto",
                                          issue=51)]),
                          _host_runner(peers, "jmspy-mqtt", qos, count)))
        out.append(Config(Row("d", f"{key}/mosquitto", "paho -> Mosquitto", cfg,
                              short=f"host, {what}"),
                          _host_runner(peers, "mosquitto", qos, count)))
    return out


def configs(quick: bool, peers: Peers) -> list[Config]:
    out: list[Config] = []
    pairs = [("sync", "5"), ("sync", "3.1.1"), ("window", "5")]
    for mode, version in pairs:
        count = (1_000 if quick else 10_000) if mode == "sync" else (2_000 if quick else 20_000)
        what = ("1 in flight (send returns on PUBACK)" if mode == "sync"
                else f"{WINDOW} in flight")
        cfg = f"MQTT {version}, QoS 1, {what}, {count:,} msgs"
        short = f"MQTT {version}, {'sync' if mode == 'sync' else f'{WINDOW} in flight'}"
        key = f"d/{mode}/{version}"
        jname = ("jmspy send()" if mode == "sync" else "jmspy send(completion_listener)")
        pname = ("paho publish + wait_for_publish" if mode == "sync"
                 else f"paho publish, max_inflight {WINDOW}")
        out.append(Config(Row("d", f"{key}/jmspy", f"{jname} -> Mosquitto", cfg,
                              baseline=f"{key}/paho", short=short,
                              goals=[Goal(0.9, over=f"{key}/paho", label="vs paho",
                                          issue=5 if version == "3.1.1" else 17)]),
                          _runner(peers, "jmspy", mode, version, count)))
        out.append(Config(Row("d", f"{key}/paho", f"{pname} -> Mosquitto", cfg, short=short),
                          _runner(peers, "paho", mode, version, count)))
    return out + host_configs(quick, peers)


def run(quick: bool, runs: int, progress: Progress, peers: Peers) -> list[Row]:
    return run_interleaved(configs(quick, peers), runs, progress)


def planned(quick: bool, runs: int) -> int:
    return len(configs(quick, Peers())) * runs


if __name__ == "__main__":
    worker_main(ROLES)
