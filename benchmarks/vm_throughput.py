"""vm:// end-to-end throughput, compiled twins vs pure twins, interleaved.

Each run is a fresh subprocess (so JMSPY_PUREPYTHON takes effect) that sends N messages
to a queue and drains them with a listener consumer (AUTO_ACKNOWLEDGE, default flow
control), timing from the first send to the last message handled. Runs alternate
compiled / pure so machine noise hits both alike; the table shows medians.

    python -m benchmarks.vm_throughput --messages 50000 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def one_run(messages: int, mode: str) -> dict[str, float]:
    """Measure in this process: send+receive concurrently, and the listener path alone."""
    from jmspy import ConnectionFactory, Session
    from jmspy.transports import vm

    name = f"bench-{os.getpid()}"
    vm.start_broker(name)
    factory = ConnectionFactory(f"vm://{name}")
    done = threading.Event()
    count = 0

    def on_message(_msg: object) -> None:
        nonlocal count
        count += 1
        if count == messages:
            done.set()

    with factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        queue = session.create_queue("bench")
        body = "x" * 100
        # (1) the listener path alone: a pre-filled queue drained by a listener
        producer = session.create_producer(queue)
        for _ in range(messages):
            producer.send(session.create_text_message(body))
        consumer = session.create_consumer(queue)
        t0 = time.perf_counter()
        consumer.set_message_listener(on_message)
        conn.start()
        done.wait()
        listener_rate = messages / (time.perf_counter() - t0)
        consumer.close()
        # (2) end to end: producer and listener running at once
        count = 0
        done.clear()
        consumer = session.create_consumer(queue)
        consumer.set_message_listener(on_message)
        send_session = conn.create_session()
        producer = send_session.create_producer(queue)
        t0 = time.perf_counter()
        for _ in range(messages):
            producer.send(send_session.create_text_message(body))
        done.wait()
        e2e_rate = messages / (time.perf_counter() - t0)
    vm.stop_broker(name)
    return {"listener": listener_rate, "end_to_end": e2e_rate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", choices=["compiled", "pure"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(args.messages, args.child)))
        return
    results: dict[str, list[dict[str, float]]] = {"compiled": [], "pure": []}
    for i in range(args.runs):
        for mode in ("compiled", "pure"):
            env = dict(os.environ)
            env["JMSPY_PUREPYTHON"] = "1" if mode == "pure" else ""
            # Run the child by path from a neutral directory: with the checkout as cwd,
            # its jmspy/ source folder would shadow the installed package.
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--child", mode,
                 "--messages", str(args.messages)],
                env=env, check=True, capture_output=True, text=True,
                cwd=tempfile.gettempdir(),
            ).stdout
            results[mode].append(json.loads(out))
            print(f"run {i + 1}/{args.runs} {mode:8}: "
                  + ", ".join(f"{k} {v:,.0f}/s" for k, v in results[mode][-1].items()),
                  file=sys.stderr)
    print(f"\nvm:// {args.messages} x 100 B, median of {args.runs} interleaved runs")
    print(f"{'path':<12} {'compiled msgs/s':>16} {'pure msgs/s':>12} {'ratio':>6}")
    for key in ("listener", "end_to_end"):
        c = statistics.median(r[key] for r in results["compiled"])
        p = statistics.median(r[key] for r in results["pure"])
        print(f"{key:<12} {c:>16,.0f} {p:>12,.0f} {c / p:>6.2f}")


if __name__ == "__main__":
    main()
