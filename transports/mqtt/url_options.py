"""The query options of ``mqtt://`` URLs: the one table :class:`.transport.MqttTransport`
reads them through (jmspy/url_options.py says why a table). docs/mqtt.md lists the same
rows; a test holds the two to agree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import SplitResult

from jmspy.tls import TLS_URL_OPTIONS
from jmspy.url_options import OptionTable, choice, flag, number, parse_addresses, whole

__all__ = ["MQTT_URL_OPTIONS", "NEVER_EXPIRES", "URL_OPTIONS", "list_options"]

#: MQTT 5's Session Expiry Interval that means "never" (the largest four-byte integer).
NEVER_EXPIRES = 0xFFFFFFFF

MQTT_URL_OPTIONS = OptionTable("mqtt", (
    choice("version", ("auto", "5", "3.1.1"), "auto", "ActiveMQ 5.17 and RabbitMQ 3.10 "
           "close the socket on an MQTT 5 CONNECT; `auto` then reconnects with 3.1.1",
           shown_default="auto (try 5, then 3.1.1)"),
    whole("keepalive", 30, "seconds; paho's network thread sends PINGREQ, never blocked by "
          "listeners (0: none)", unit="seconds", minimum=0, maximum=65535),
    flag("sync_send", True, "a PERSISTENT send waits for the broker's PUBACK (JMS "
         "semantics); `false` pipelines (up to `send_window` in flight)"),
    whole("send_window", 100, "sends with a CompletionListener (JMS 2 async send) in flight "
          "at once; each completes after its PUBACK, in send order; a sender blocks while "
          "the window is full (also paho's in-flight limit), except on an event loop's "
          "thread, where the send is parked and written when a PUBACK makes room",
          unit="sends", minimum=1,
          maximum=65535),
    whole("session_expiry", NEVER_EXPIRES, "MQTT 5 Session Expiry Interval, used when the "
          "connection has a client id", unit="seconds", minimum=0, maximum=NEVER_EXPIRES,
          shown_default=f"{NEVER_EXPIRES} (never)"),
    number("connect_timeout", 10.0, "seconds to wait for CONNACK / SUBACK", unit="seconds"),
    choice("queue_selectors", ("discard",), None, "`discard` accepts that a selector on a "
           "Queue or shared subscription acknowledges and drops the messages it skips",
           shown_default="(refused)"),
), tls_scheme="mqtts", shared_by_list=True)

#: The tables of the schemes the MQTT transport serves, by scheme.
URL_OPTIONS: Mapping[str, OptionTable] = {
    "mqtt": MQTT_URL_OPTIONS,
    "mqtts": MQTT_URL_OPTIONS.plus("mqtts", TLS_URL_OPTIONS),
    "mqtt+ssl": MQTT_URL_OPTIONS.plus("mqtt+ssl", TLS_URL_OPTIONS),
}


def list_options(urls: Sequence[SplitResult]) -> dict[str, Any]:
    """The options of the address list ``urls`` (one URL: its own): the first URL's, for
    every broker, since one set of them configures the connection's paho client."""
    return parse_addresses(URL_OPTIONS, urls)[0]
