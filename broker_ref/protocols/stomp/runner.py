"""Run a STOMP broker until SIGINT/SIGTERM: what ``jmspy broker`` does."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable

from ...config import BrokerConfig
from ...core import Broker
from .server import StompServer

__all__ = ["run_broker", "serve"]


async def serve(
    config: BrokerConfig,
    stop: asyncio.Event,
    on_ready: Callable[[str, int], None] | None = None,
) -> None:
    """Serve until ``stop`` is set, then close listeners, connections and the broker."""
    from jmspy.stomp_frames import CodecLimits

    broker = Broker(**config.broker_kwargs())
    server = StompServer(
        broker,
        limits=CodecLimits(
            max_frame_bytes=config.max_frame_bytes,
            max_headers=config.max_headers,
            max_header_bytes=config.max_header_bytes,
        ),
        heartbeat_ms=config.heartbeat_ms,
    )
    try:
        host, port = await server.start(config.host, config.port)
    except BaseException:
        broker.close()
        raise
    try:
        if on_ready is not None:
            on_ready(host, port)
        await stop.wait()
    finally:
        await server.stop()


def run_broker(config: BrokerConfig) -> int:
    """Blocking: print the listening address, serve until SIGINT/SIGTERM, return 0."""

    def ready(host: str, port: int) -> None:
        print(f"jmspy broker listening on {host}:{port}", flush=True)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(config, stop, ready)

    asyncio.run(main())
    print("jmspy broker stopped", file=sys.stderr, flush=True)
    return 0
