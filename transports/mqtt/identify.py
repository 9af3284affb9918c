"""Which MQTT broker a connection reached, for ``messaging.system``.

MQTT's CONNACK names no server (STOMP's CONNECTED has a ``server`` header), but most
brokers publish their name and version as the retained message of
``$SYS/broker/version``: Mosquitto ("mosquitto version 2.0.11"), EMQX, HiveMQ, and the
bundled broker's MQTT host ("jmspy 0.9.0"). Asking costs one round trip, so only
connections whose telemetry records anything ask (jmspy/telemetry.py), once.

The question needs no timer: the SUBSCRIBE is followed at once by an UNSUBSCRIBE of the
same filter, and a broker answers a client's packets in order on one stream, so the
retained message, if there is one, arrives before the UNSUBACK. A broker that refuses
``$SYS`` filters, or has no such message, leaves the answer empty after that one round
trip. The callback goes through paho's public ``message_callback_add`` and is removed
again, so the connection's own subscriptions never see the message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jmspy.wire.headers import MQTT_VERSION_TOPIC as VERSION_TOPIC

__all__ = ["VERSION_TOPIC", "broker_version"]


def broker_version(client: Any, wait: Callable[[int, int, float], list[Any] | None],
                   timeout: float) -> str:
    """The text of ``client``'s broker's ``$SYS/broker/version``, or "" when the broker
    has none or refused to say within ``timeout`` s. ``wait(rc, mid, timeout)`` is the
    transport's wait for the SUBACK/UNSUBACK of packet ``mid`` (its reason codes, or None)."""
    answer: list[str] = []

    def on_version(_client: Any, _userdata: Any, message: Any) -> None:
        if not answer:
            payload = message.payload
            answer.append(payload.decode("utf-8", "replace")
                          if isinstance(payload, bytes | bytearray) else str(payload))

    client.message_callback_add(VERSION_TOPIC, on_version)
    try:
        rc, mid = client.subscribe(VERSION_TOPIC, qos=0)
        urc, umid = client.unsubscribe(VERSION_TOPIC)  # at once: one round trip
        # in-order delivery: anything retained for the filter came before this answer
        wait(urc, umid, timeout)
        wait(rc, mid, 0.0)  # the SUBACK came first: take its codes (granted or refused)
    finally:
        client.message_callback_remove(VERSION_TOPIC)
    return answer[0].strip() if answer else ""

