"""(d) jmspy over MQTT (mqtt:// transport) vs raw paho-mqtt, both on Mosquitto, QoS 1.

Producer and consumer are separate processes; the consumer subscribes before the producer
starts (MQTT topics keep nothing for absent subscribers). paho: MQTT 3.1.1, in-flight
window 20 (its default), clean session, the send time in the payload's first bytes. jmspy:
a Topic with AUTO_ACKNOWLEDGE and the send time in a property (if the transport carries
properties; otherwise no latency figure). Ratio: jmspy over paho (target 0.9x).
"""

from __future__ import annotations

import uuid
from typing import Any

from .common import Config, Progress, Row, run_interleaved, run_pair
from .peers import Peers


def _runner(peers: Peers, client: str, count: int) -> Any:
    def run(_rnd: int) -> dict[str, Any]:
        ep = peers.get("mosquitto")
        if isinstance(ep, str):
            return {"error": ep}
        base = {"host": ep.host, "port": ep.mqtt_port, "count": count, "timeout": 180,
                "qos": 1, "inflight": 20}
        if client == "paho":
            base["dest"] = f"bench/{uuid.uuid4().hex[:12]}"
            return run_pair("workers", {**base, "role": "paho-consumer"},
                            {**base, "role": "paho-producer"})
        base.update(url=f"mqtt://{ep.host}:{ep.mqtt_port}", dest=f"bench{uuid.uuid4().hex[:12]}",
                    topic=True)
        return run_pair("workers", {**base, "role": "jmspy-consumer"},
                        {**base, "role": "jmspy-producer"})

    return run


def configs(quick: bool, peers: Peers) -> list[Config]:
    count = 2_000 if quick else 20_000
    cfg = f"QoS 1, {count:,} msgs"
    return [
        Config(Row("d", "d/jmspy", "jmspy (mqtt://) -> Mosquitto", cfg, baseline="d/paho",
                   target=0.9, short="QoS 1, MQTT 5"), _runner(peers, "jmspy", count)),
        Config(Row("d", "d/paho", "paho -> Mosquitto", cfg + ", in-flight 20",
                   short="QoS 1, MQTT 3.1.1, in-flight 20"),
               _runner(peers, "paho", count)),
    ]


def run(quick: bool, runs: int, progress: Progress, peers: Peers) -> list[Row]:
    return run_interleaved(configs(quick, peers), runs, progress)


def planned(quick: bool, runs: int) -> int:
    return len(configs(quick, Peers())) * runs
