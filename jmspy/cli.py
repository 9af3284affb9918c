"""The ``jmspy`` command line.

``jmspy demo`` runs a producer and a listener consumer over ``vm://`` and prints the
consumer's flow-control counters as they change, so a newcomer sees Open MQ flow control
working (batches of imqConsumerFlowLimit, top-ups at the threshold) in one command.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from jmspy import ConnectionFactory, Session, _speedups
    from jmspy.transports.vm import get_broker

    factory = ConnectionFactory(
        "vm://demo",
        imqConsumerFlowLimit=args.limit,
        imqConsumerFlowThreshold=args.threshold,
    )
    total = args.messages
    done = threading.Event()
    received = 0

    def on_message(message: object) -> None:
        nonlocal received
        received += 1
        if args.work_ms:
            time.sleep(args.work_ms / 1000.0)
        if received == total:
            done.set()

    twins = "pure Python" if _speedups.PURE_PYTHON else "compiled"
    print(f"jmspy demo: {total} messages over vm://demo ({twins} twins), "
          f"imqConsumerFlowLimit={args.limit}, imqConsumerFlowThreshold={args.threshold}%")
    with factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        queue = session.create_queue("demo.orders")
        producer = session.create_producer(queue)
        for i in range(total):
            producer.send(session.create_text_message(f"order {i}", {"n": i}))
        consumer = session.create_consumer(queue)
        consumer.set_message_listener(on_message)
        started = time.perf_counter()
        conn.start()
        print(f"{'received':>9} {'buffered':>9} {'unconsumed':>10} {'batches':>8} "
              f"{'pauses':>7} {'broker delivering':>18} {'broker queued':>14}")

        def row() -> None:
            flow = consumer.flow_stats()
            stats = conn.destination_stats(queue)
            print(f"{received:>9} {flow.buffered:>9} {flow.unconsumed:>10} "
                  f"{flow.batches_requested:>8} {flow.pauses:>7} "
                  f"{stats['deliveringCount']:>18} {stats['messageCount']:>14}")

        while not done.wait(args.interval):
            row()
        elapsed = time.perf_counter() - started
        row()
        flow = consumer.flow_stats()
        print(f"done: {total} messages in {elapsed:.2f}s ({total / elapsed:,.0f} msgs/s); "
              f"effective limit {flow.limit} set by {flow.limited_by}; "
              f"{flow.batches_requested} batches requested")
    get_broker("demo").stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jmspy", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="producer + listener over vm:// with flow counters")
    demo.add_argument("--messages", type=int, default=20_000)
    demo.add_argument("--limit", type=int, default=1000, help="imqConsumerFlowLimit")
    demo.add_argument("--threshold", type=int, default=50, help="imqConsumerFlowThreshold")
    demo.add_argument("--work-ms", type=float, default=0.0,
                      help="simulated work per message in the listener")
    demo.add_argument("--interval", type=float, default=0.1,
                      help="seconds between counter rows")
    demo.set_defaults(func=_demo)
    from jmspy.cli_broker import add_commands

    add_commands(sub)
    from jmspy.cli_worker import add_command as add_worker

    add_worker(sub)
    bench = sub.add_parser("bench", help="python -m benchmarks [args] (from a source checkout)",
                           add_help=False, prefix_chars="+")  # pass every option through
    bench.add_argument("bench_args", nargs="*")
    bench.set_defaults(func=lambda a: __import__("subprocess").call(
        [sys.executable, "-m", "benchmarks", *a.bench_args]))
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from jmspy import JMSException

        if isinstance(exc, JMSException):
            print(f"jmspy: error: {exc}", file=sys.stderr)
            return 2
        raise
    return result


if __name__ == "__main__":
    sys.exit(main())
