"""The query options of ``stomp://`` URLs: the one table :class:`.connect.ConnectOptions`
reads them through (jmspy/url_options.py says why a table). docs/transports.md lists the
same rows; a test holds the two to agree."""

from __future__ import annotations

from collections.abc import Mapping

from jmspy.idle_spin import DEFAULT_IDLE_SPIN_US, MAX_IDLE_SPIN_US
from jmspy.stomp_frames import DEFAULT_MAX_FRAME_BYTES
from jmspy.tls import TLS_URL_OPTIONS
from jmspy.url_options import OptionTable, choice, number, text, whole

from .mapping import DIALECTS

__all__ = ["STOMP_TLS_URL_OPTIONS", "STOMP_URL_OPTIONS", "URL_OPTIONS"]

STOMP_URL_OPTIONS = OptionTable("stomp", (
    choice("version", ("1.2", "1.1"), "1.2",
           "STOMP version; 1.2 falls back to 1.1 when the broker refuses 1.2"),
    whole("heartbeat", 10000, "heart-beat interval asked of the broker, both directions "
          "(0: none)", unit="milliseconds", minimum=0),
    text("vhost", "/", "sent as the `host` header: RabbitMQ reads it as the virtual host "
         "(stomp.py's default, the address, makes RabbitMQ refuse the connection)"),
    number("connect_timeout", 10.0, "how long to wait for CONNECTED", unit="seconds"),
    whole("max_frame_bytes", DEFAULT_MAX_FRAME_BYTES, "the largest message body this client "
          "accepts (100 MiB, like ActiveMQ's own STOMP limit)", unit="bytes", minimum=1),
    choice("dialect", DIALECTS, None, "speak this broker's headers whatever CONNECTED's "
           "`server` header says", shown_default="(from CONNECTED)"),
    choice("rabbitmq_queue_selectors", ("discard",), None, "on RabbitMQ, accept that a "
           "selector on a Queue acknowledges and drops the messages it skips",
           shown_default="(refused)"),
    whole("idle_spin_us", DEFAULT_IDLE_SPIN_US, "how long a session thread reading the "
          "socket polls it before it sleeps (0: off)", unit="microseconds", minimum=0,
          maximum=MAX_IDLE_SPIN_US),
), tls_scheme="stomp+ssl")

#: ``stomp+ssl://`` and ``stomps://``: the plain options and the TLS ones (jmspy/tls.py).
STOMP_TLS_URL_OPTIONS = STOMP_URL_OPTIONS.plus("stomp+ssl", TLS_URL_OPTIONS)

#: The tables of the schemes the STOMP transport serves, by scheme.
URL_OPTIONS: Mapping[str, OptionTable] = {
    "stomp": STOMP_URL_OPTIONS, "stomp+ssl": STOMP_TLS_URL_OPTIONS,
    "stomps": STOMP_URL_OPTIONS.plus("stomps", TLS_URL_OPTIONS),
}
