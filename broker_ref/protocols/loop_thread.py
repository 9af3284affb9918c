"""An event loop in a thread of its own: what an in-process broker's connector runs on.

``BrokerHost.add_connector`` serves a protocol (STOMP, MQTT) to other processes while the
application keeps calling the broker over ``vm://``: each connector's server runs on a
loop of its own in a daemon thread, and the application's threads hand it coroutines.
Starting, calling into and halting that loop is the same for every protocol, so it lives
here once; each connector composes one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "listener_url"]

T = TypeVar("T")


def listener_url(scheme: str, address: tuple[str, int]) -> str:
    """``scheme://host:port`` for a bound address (an IPv6 host in brackets)."""
    host, port = address
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


class LoopThread:
    """A new event loop, run forever by a daemon thread named ``name`` once started."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name,
                                        daemon=True)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coro`` on the loop and wait (at most ``timeout`` s) for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def start_with(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Start the thread and run ``coro`` (a listener's start) on the loop; if it
        raises (a port that cannot be bound), halt again, so no thread is left behind."""
        self.start()
        try:
            return self.run(coro, timeout)
        except BaseException:
            self.halt()
            raise

    def halt(self) -> None:
        """Stop the loop and join its thread (unless called on it), then close the loop."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not threading.current_thread():
                self._thread.join(30.0)
        if not self._loop.is_running():
            self._loop.close()
