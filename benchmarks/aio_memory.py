"""(aio memory) A slow asyncio consumer's resident memory, jmspy.aio against aio-pika:
``python -m benchmarks.aio_memory [--count 20000] [--size 4096] [--seconds 4]``.

RabbitMQ holds a backlog of ``count`` messages of ``size`` bytes in one queue per case;
then a consumer process starts an ``async for`` whose body takes 5 ms per message (a slow
consumer: a database write, an HTTP call) and runs for ``seconds``, sampling its own
resident set size (RSS). What grows is what the client library holds that the
application has not asked for yet:

* jmspy.aio over ``stomp://`` (its default flow limit, 1,000, and ``imqConsumerFlowLimit
  = 100``): the buffer is the consumer's flow window, so the broker stops sending at the
  limit and RSS stays flat;
* aio-pika over AMQP 0.9.1 with its defaults (no ``set_qos``: RabbitMQ's unlimited
  prefetch) and with ``prefetch_count=100``: its iterator's buffer is an unbounded
  ``asyncio.Queue``, bounded only by what the channel's QoS lets RabbitMQ push.

Each case runs in a fresh process (``RSS growth`` = the highest sample while it consumes
less the one taken once connected, before it subscribed), against the same
RabbitMQ, with the same acknowledgement (one per message, after the body ran).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from .aio import _interop
from .common import neutral_dir, worker_env

#: The slow body: what each message costs the application (seconds).
WORK = 0.005
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE // 1024


class Samples:
    """RSS now and then while the slow consumer runs."""

    def __init__(self, seconds: float, base: int) -> None:
        self.base = base
        self.peak = self.base
        self.consumed = 0
        self.until = time.monotonic() + seconds
        self._next = 0.0

    def step(self) -> bool:
        """One message processed: sample every 0.25 s; False once the time is up."""
        self.consumed += 1
        now = time.monotonic()
        if now >= self._next:
            self.peak = max(self.peak, rss_kb())
            self._next = now + 0.25
        return now < self.until

    def result(self) -> dict[str, Any]:
        return {"base_kb": self.base, "growth_kb": self.peak - self.base,
                "consumed": self.consumed}


async def _jmspy(spec: dict[str, Any]) -> dict[str, Any]:
    from jmspy.aio import AsyncConnectionFactory

    props = {} if spec["window"] is None else {"imqConsumerFlowLimit": spec["window"]}
    factory = AsyncConnectionFactory(f"stomp://127.0.0.1:{spec['stomp_port']}", **props)
    async with factory.create_connection() as conn:
        session = await conn.create_session()
        base = rss_kb()
        consumer = await session.create_consumer(session.create_queue(spec["queue"]))
        conn.start()
        await asyncio.sleep(1.0)  # the broker pushes what the window lets it
        samples = Samples(spec["seconds"], base)
        async for _message in consumer:
            await asyncio.sleep(WORK)
            if not samples.step():
                break
        return samples.result()


async def _aio_pika(spec: dict[str, Any]) -> dict[str, Any]:
    import aio_pika

    connection = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{spec['amqp_port']}/")
    async with connection:
        channel = await connection.channel()
        if spec["window"] is not None:
            await channel.set_qos(prefetch_count=spec["window"])
        queue = await channel.declare_queue(spec["queue"], durable=True)
        base = rss_kb()
        async with queue.iterator() as messages:
            await asyncio.sleep(1.0)  # the broker pushes what the QoS lets it
            samples = Samples(spec["seconds"], base)
            async for message in messages:
                async with message.process():
                    await asyncio.sleep(WORK)
                if not samples.step():
                    break
        return samples.result()


_CASES: dict[str, Callable[[dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]]] = {
    "jmspy.aio": _jmspy, "aio-pika": _aio_pika}


def _fill(amqp_port: int, queue: str, count: int, size: int) -> None:
    async def fill() -> None:
        import aio_pika

        connection = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{amqp_port}/")
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            await channel.declare_queue(queue, durable=True)
            body = b"x" * size
            for _ in range(count):
                await channel.default_exchange.publish(aio_pika.Message(body),
                                                       routing_key=queue)

    asyncio.run(fill())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args(argv)
    rabbit = _interop().RabbitMQ()
    rabbit.start()
    rows = []
    try:
        for label, window in (("jmspy.aio", None), ("jmspy.aio", 100), ("aio-pika", None),
                              ("aio-pika", 100)):
            queue = f"bench.memory.{uuid.uuid4().hex[:8]}"
            _fill(rabbit.amqp_port, queue, args.count, args.size)
            spec = {"case": label, "window": window, "queue": queue,
                    "seconds": args.seconds, "stomp_port": rabbit.stomp_port,
                    "amqp_port": rabbit.amqp_port}
            proc = subprocess.run([sys.executable, "-m", "benchmarks.aio_memory",
                                   json.dumps(spec)], env=worker_env(), cwd=neutral_dir(),
                                  capture_output=True, text=True, timeout=300)
            lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
            if not lines:
                raise RuntimeError(f"{label} failed: {proc.stderr[-2000:]}")
            got = json.loads(lines[-1])
            rows.append((label, window, got))
            print(f"{label:10} window {window or 'default':>7}: RSS +{got['growth_kb']:,} KB "
                  f"over {got['base_kb']:,} KB, {got['consumed']} consumed", flush=True)
    finally:
        rabbit.close()
    print(f"\n{args.count:,} queued messages of {args.size:,} B, a consumer taking "
          f"{WORK * 1000:.0f} ms each for {args.seconds:g} s")
    print("| client | window | RSS growth | consumed |")
    print("| --- | --- | ---: | ---: |")
    for label, window, got in rows:
        shown = "default" if window is None else str(window)
        print(f"| {label} | {shown} | {got['growth_kb'] / 1024:.1f} MB | {got['consumed']} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("{"):
        spec = json.loads(sys.argv[1])
        print(json.dumps(asyncio.run(_CASES[spec["case"]](spec))))
    else:
        raise SystemExit(main())
