"""An MQTT listener for an in-process broker (``BrokerHost.add_connector("mqtt://...")``).

Like the STOMP connector (:mod:`..stomp.connector`): an :class:`MqttServer` on an event
loop in its own thread, holding the in-process broker's lock around every core call;
the broker stays open when it stops (its owner closes it).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ...core import Broker
from .server import MqttServer

__all__ = ["MqttConnector"]

T = TypeVar("T")


class MqttConnector:
    """Serves MQTT for a broker that others also call, from a thread of its own."""

    def __init__(self, broker: Broker, core_lock: AbstractContextManager[object], *,
                 name: str = "jmspy") -> None:
        self._broker = broker
        self._core_lock = core_lock
        self._loop = asyncio.new_event_loop()
        self._server: MqttServer | None = None
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"jmspy-mqtt-{name}", daemon=True)
        self.address: tuple[str, int] | None = None

    @property
    def url(self) -> str:
        assert self.address is not None, "start() first"
        host, port = self.address
        return f"mqtt://[{host}]:{port}" if ":" in host else f"mqtt://{host}:{port}"

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def start(self, host: str, port: int) -> tuple[str, int]:
        async def listen() -> tuple[str, int]:
            self._server = MqttServer(self._broker, core_lock=self._core_lock)
            return await self._server.start(host, port)

        self._thread.start()
        try:
            self.address = self._run(listen(), 30.0)
        except BaseException:
            self._halt()
            raise
        return self.address

    def stop(self) -> None:
        server = self._server
        if server is not None and self._thread.is_alive():
            self._server = None
            self._run(server.stop(), 30.0)
        self._halt()

    def _halt(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not threading.current_thread():
                self._thread.join(30.0)
        if not self._loop.is_running():
            self._loop.close()
