"""An MQTT listener for an in-process broker (``BrokerHost.add_connector("mqtt://...")``).

Like the STOMP connector (:mod:`..stomp.connector`): an :class:`MqttServer` on an event
loop in its own thread, holding the in-process broker's lock around every core call;
the broker stays open when it stops (its owner closes it).
"""

from __future__ import annotations

import ssl
from contextlib import AbstractContextManager

from ...core import Broker
from ..loop_thread import LoopThread, listener_url
from .hub import MqttHub
from .server import MqttServer

__all__ = ["MqttConnector"]


class MqttConnector:
    """Serves MQTT for a broker that others also call, from a thread of its own."""

    def __init__(self, broker: Broker, core_lock: AbstractContextManager[object], *,
                 name: str = "jmspy", hub: MqttHub | None = None) -> None:
        self._broker = broker
        self._hub = hub  # shared with the broker's other MQTT connectors (None: its own)
        self._core_lock = core_lock
        self._server: MqttServer | None = None
        self._loop = LoopThread(f"jmspy-mqtt-{name}")
        self.address: tuple[str, int] | None = None
        self._tls = False

    @property
    def url(self) -> str:
        assert self.address is not None, "start() first"
        return listener_url("mqtts" if self._tls else "mqtt", self.address)

    def start(self, host: str, port: int, *, ssl_context: ssl.SSLContext | None = None,
              user_from_cert: str | None = None) -> tuple[str, int]:
        """Listen on ``host:port`` (over TLS with ``ssl_context``; ``user_from_cert``:
        the client certificate's subject field that logs its user in)."""
        async def listen() -> tuple[str, int]:
            self._server = MqttServer(self._broker, core_lock=self._core_lock, hub=self._hub)
            tls = None
            if ssl_context is not None:
                from ..stomp.tls import TlsListener

                tls = TlsListener(ssl_context, user_from_cert=user_from_cert)
            return await self._server.start(host, port, tls=tls)

        self._tls = ssl_context is not None
        self.address = self._loop.start_with(listen(), 30.0)
        return self.address

    def stop(self) -> None:
        server = self._server
        if server is not None and self._loop.alive:
            self._server = None
            self._loop.run(server.stop(), 30.0)
        self._loop.halt()
