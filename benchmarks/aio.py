"""(aio) jmspy.aio against the async peers and against the sync API:
``python -m benchmarks.aio [--rounds 3] [--count 2000]``.

In one run, interleaved round by round (each round runs every case once, in turn):

* ``vm://``: jmspy.aio against jmspy's sync API on the same in-process broker.
* RabbitMQ: jmspy.aio over ``stomp://`` against aio-pika over AMQP 0.9.1, and against
  stompman (asyncio STOMP) over the same STOMP port, on the same RabbitMQ.
* Mosquitto: jmspy.aio over ``mqtt://`` against aiomqtt, on the same Mosquitto.
* pipelined (``--only pipelined``): the same pairs on RabbitMQ and Mosquitto, but the
  producer makes all its sends at once (``asyncio.gather``) and the client's window of
  sends in flight (100: jmspy's ``send_window``, aiomqtt's ``max_inflight_messages``;
  aio-pika and stomp:// take what the broker confirms) bounds what is on the wire.

Each case sends ``count`` 100-byte persistent messages from one producer and consumes
them on the same connection's consumer, concurrently, with the same semantics on both
sides of a pair: every send awaited until the broker confirmed it (a STOMP receipt, an
AMQP publisher confirm, an MQTT QoS 1 PUBACK), a prefetch window of 100 (jmspy's
``imqConsumerFlowLimit``, aio-pika's ``prefetch_count``, stompman's ``prefetch-count``
header; MQTT has none on 3.1.1), and one acknowledgement per message (jmspy
AUTO_ACKNOWLEDGE; aio-pika ``message.process()``; stompman's ``client-individual`` ACK
after the handler; aiomqtt's automatic PUBACK). The figure is messages per second from
the first send to the last message received, the median over rounds; beside it, the
client process's CPU time and context switches per message (``getrusage``: the
benchmark's own process, where the case runs; the broker's are not counted).

The brokers come from the interop tests' recipes (tests/interop/brokers.py) on free
loopback ports. aio-pika and aiomqtt are in the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterable, Awaitable, Callable
from pathlib import Path
from typing import Any

from jmspy import ConnectionFactory
from jmspy.aio import AsyncConnectionFactory

_TESTS = Path(__file__).resolve().parent.parent / "tests"
WINDOW = 100
BODY = "x" * 100

Case = Callable[[int], float]


def _rate(count: int, started: float) -> float:
    return count / (time.perf_counter() - started)


async def _produce_and_count(count: int, started: float, produce: Callable[[], Awaitable[None]],
                             messages: AsyncIterable[Any]) -> float:
    """Run ``produce()`` as a task while ``count`` of ``messages`` arrive: the rate from
    ``started`` to the last one received (the sender is awaited after)."""
    sender = asyncio.create_task(produce())
    n = 0
    async for _ in messages:
        n += 1
        if n == count:
            break
    rate = _rate(count, started)
    await sender
    return rate


# -- jmspy.aio -------------------------------------------------------------------------
async def _jmspy_aio(url: str, count: int, topic: bool, pipelined: bool = False) -> float:
    factory = AsyncConnectionFactory(url, imqConsumerFlowLimit=WINDOW)
    async with factory.create_connection() as conn:
        session = await conn.create_session()
        sending = await conn.create_session()
        name = f"bench.aio.{uuid.uuid4().hex[:8]}"
        where = session.create_topic(name) if topic else session.create_queue(name)
        consumer = await session.create_consumer(where)
        producer = await sending.create_producer(where)
        conn.start()
        started = time.perf_counter()

        async def produce() -> None:
            if pipelined:
                await asyncio.gather(*(producer.send(sending.create_text_message(BODY))
                                       for _ in range(count)))
                return
            for _ in range(count):
                await producer.send(sending.create_text_message(BODY))

        return await _produce_and_count(count, started, produce, consumer)


def jmspy_aio(url: str, topic: bool = False, pipelined: bool = False) -> Case:
    return lambda count: asyncio.run(_jmspy_aio(url, count, topic, pipelined))


# -- jmspy's sync API ------------------------------------------------------------------
def jmspy_sync(url: str) -> Case:
    def run(count: int) -> float:
        factory = ConnectionFactory(url, imqConsumerFlowLimit=WINDOW)
        with factory.create_connection() as conn:
            session = conn.create_session()
            sending = conn.create_session()
            queue = session.create_queue(f"bench.sync.{uuid.uuid4().hex[:8]}")
            consumer = session.create_consumer(queue)
            producer = sending.create_producer(queue)
            conn.start()
            started = time.perf_counter()

            def produce() -> None:
                for _ in range(count):
                    producer.send(sending.create_text_message(BODY))

            sender = threading.Thread(target=produce)
            sender.start()
            for _ in range(count):
                assert consumer.receive(30) is not None
            rate = _rate(count, started)
            sender.join()
            return rate

    return run


# -- aio-pika (AMQP 0.9.1) -------------------------------------------------------------
async def _aio_pika(port: int, count: int, pipelined: bool = False) -> float:
    import aio_pika

    connection = await aio_pika.connect_robust(f"amqp://guest:guest@127.0.0.1:{port}/")
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        await channel.set_qos(prefetch_count=WINDOW)
        queue = await channel.declare_queue(f"bench.pika.{uuid.uuid4().hex[:8]}",
                                            durable=True, auto_delete=True)
        started = time.perf_counter()

        def publish() -> Awaitable[Any]:
            return channel.default_exchange.publish(
                aio_pika.Message(BODY.encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                routing_key=queue.name)

        async def produce() -> None:
            if pipelined:
                await asyncio.gather(*(publish() for _ in range(count)))
                return
            for _ in range(count):
                await publish()

        sender = asyncio.create_task(produce())
        n = 0
        async with queue.iterator() as messages:
            async for message in messages:
                async with message.process():
                    n += 1
                if n == count:
                    break
        rate = _rate(count, started)
        await sender
        return rate


def aio_pika(port: int, pipelined: bool = False) -> Case:
    return lambda count: asyncio.run(_aio_pika(port, count, pipelined))


# -- stompman (asyncio STOMP) ----------------------------------------------------------
async def _stompman(port: int, count: int) -> float:
    import stompman

    done = asyncio.Event()
    n = 0

    async def handler(_frame: Any) -> None:  # acknowledged by stompman once it returns
        nonlocal n
        n += 1
        if n == count:
            done.set()

    destination = f"/queue/bench.stompman.{uuid.uuid4().hex[:8]}"
    # stompman sends the server's address as CONNECT's host header, which RabbitMQ reads
    # as the virtual host: main() makes one of that name (a vhost costs nothing per message)
    server = stompman.ConnectionParameters("127.0.0.1", port, "guest", "guest")
    async with stompman.Client([server]) as client:
        subscription = await client.subscribe(
            destination, handler, ack="client-individual",
            headers={"prefetch-count": str(WINDOW)},
            on_suppressed_exception=lambda exc, frame: print(exc, file=sys.stderr))
        started = time.perf_counter()
        for _ in range(count):  # each send awaited until its RECEIPT
            await client.send(BODY.encode(), destination, headers={"persistent": "true"},
                              receipt_timeout=30)
        await done.wait()
        rate = _rate(count, started)
        await subscription.unsubscribe()
        return rate


def stompman_case(port: int) -> Case:
    return lambda count: asyncio.run(_stompman(port, count))


# -- aiomqtt ---------------------------------------------------------------------------
async def _aiomqtt(port: int, count: int, pipelined: bool = False) -> float:
    import aiomqtt

    topic = f"bench/aiomqtt/{uuid.uuid4().hex[:8]}"
    async with aiomqtt.Client("127.0.0.1", port, max_inflight_messages=WINDOW) as client:
        client.pending_calls_threshold = count  # its warning per publish past 10 pending
        await client.subscribe(topic, qos=1)
        started = time.perf_counter()

        async def produce() -> None:
            if pipelined:
                await asyncio.gather(*(client.publish(topic, BODY.encode(), qos=1)
                                       for _ in range(count)))
                return
            for _ in range(count):
                await client.publish(topic, BODY.encode(), qos=1)

        return await _produce_and_count(count, started, produce, client.messages)


def aiomqtt(port: int, pipelined: bool = False) -> Case:
    return lambda count: asyncio.run(_aiomqtt(port, count, pipelined))


# -- the run ---------------------------------------------------------------------------
def _medians(rows: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    rates, cpus, switches = zip(*rows, strict=True)
    return statistics.median(rates), statistics.median(cpus), statistics.median(switches)


def _measured(case: Case, count: int) -> tuple[float, float, float]:
    """``case(count)``'s rate, and this process's CPU microseconds and context switches
    (voluntary and not) per message while it ran (set-up and tear-down included)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    rate = case(count)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    switches = ((after.ru_nvcsw + after.ru_nivcsw) - (before.ru_nvcsw + before.ru_nivcsw))
    return rate, cpu / count * 1e6, switches / count


def _interop() -> Any:
    path = _TESTS / "interop"
    if not path.is_dir():
        raise RuntimeError(f"{path} not found (run from a source checkout)")
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
    import brokers  # type: ignore[import-not-found]

    return brokers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--only", choices=["vm", "rabbitmq", "mosquitto", "pipelined"],
                        action="append")
    args = parser.parse_args(argv)
    only = set(args.only or ["vm", "rabbitmq", "mosquitto", "pipelined"])
    brokers = _interop()
    stops: list[Callable[[], None]] = []
    pairs: list[tuple[str, str, Case, str, Case]] = []
    try:
        if "vm" in only:
            from jmspy.transports import vm

            name = f"bench-aio-{uuid.uuid4().hex[:6]}"
            vm.start_broker(name)
            stops.append(lambda: vm.stop_broker(name))
            pairs.append(("vm://", "jmspy.aio", jmspy_aio(f"vm://{name}"),
                          "jmspy sync", jmspy_sync(f"vm://{name}")))
        if only & {"rabbitmq", "pipelined"}:
            rabbit = brokers.RabbitMQ()
            rabbit_process = rabbit.start()
            stops.append(rabbit.close)
            rabbit_url = f"stomp://127.0.0.1:{rabbit.stomp_port}"
        if "rabbitmq" in only:
            pairs.append(("RabbitMQ", "jmspy.aio stomp://", jmspy_aio(rabbit_url),
                          "aio-pika AMQP", aio_pika(rabbit.amqp_port)))
            for ctl in (("add_vhost", "127.0.0.1"),
                        ("set_permissions", "-p", "127.0.0.1", "guest", ".*", ".*", ".*")):
                brokers.rabbitmqctl(rabbit_process, *ctl)
            pairs.append(("RabbitMQ STOMP", "jmspy.aio stomp://", jmspy_aio(rabbit_url),
                          "stompman", stompman_case(rabbit.stomp_port)))
        if "pipelined" in only:
            pairs.append(("RabbitMQ gather", "jmspy.aio stomp://",
                          jmspy_aio(rabbit_url, pipelined=True),
                          "aio-pika AMQP", aio_pika(rabbit.amqp_port, pipelined=True)))
        if only & {"mosquitto", "pipelined"}:
            mosquitto = brokers.Mosquitto()
            mosquitto.start()
            stops.append(mosquitto.close)
            mqtt_url = f"mqtt://127.0.0.1:{mosquitto.mqtt_port}"
        if "mosquitto" in only:
            pairs.append(("Mosquitto", "jmspy.aio mqtt://", jmspy_aio(mqtt_url, topic=True),
                          "aiomqtt", aiomqtt(mosquitto.mqtt_port)))
        if "pipelined" in only:
            pairs.append(("Mosquitto gather", "jmspy.aio mqtt://",
                          jmspy_aio(mqtt_url, topic=True, pipelined=True),
                          "aiomqtt", aiomqtt(mosquitto.mqtt_port, pipelined=True)))
        results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        for rnd in range(args.rounds):
            for broker, ours, our_case, peer, peer_case in pairs:
                for label, case in ((ours, our_case), (peer, peer_case)):
                    rate, cpu_us, switches = _measured(case, args.count)
                    results.setdefault((broker, label), []).append((rate, cpu_us, switches))
                    print(f"round {rnd + 1}: {broker:16} {label:20} {rate:9.0f} msg/s "
                          f"{cpu_us:7.1f} us CPU/msg {switches:5.2f} switches/msg", flush=True)
        print(f"\n{args.count} persistent 100 B messages, window {WINDOW}, "
              f"median of {args.rounds} rounds (client CPU us / context switches per msg)")
        print("| broker | jmspy.aio | msg/s | CPU, switches | peer | msg/s | CPU, switches "
              "| jmspy.aio / peer |")
        print("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: |")
        for broker, ours, _, peer, _ in pairs:
            a, a_cpu, a_cs = _medians(results[(broker, ours)])
            b, b_cpu, b_cs = _medians(results[(broker, peer)])
            print(f"| {broker} | {ours} | {a:.0f} | {a_cpu:.0f}, {a_cs:.1f} | {peer} | {b:.0f} "
                  f"| {b_cpu:.0f}, {b_cs:.1f} | {a / b:.2f}x |")
    finally:
        for stop in reversed(stops):
            try:
                stop()
            except Exception as exc:  # stopping the others matters more
                print(f"(stopping a broker failed: {exc})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
