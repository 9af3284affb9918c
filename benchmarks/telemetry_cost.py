"""What OpenTelemetry tracing costs per message (jmspy/telemetry.py).

``python -m benchmarks.telemetry_cost [--count 20000] [--rounds 3]``

One ``vm://`` connection, one producer and one consumer on one thread: each step sends a
100 B text message and receives it (a ``send`` and a ``receive`` span when traced). Three
set-ups, each in its own child process so one never leaves its provider to the next,
interleaved round by round; the best round's microseconds per message are printed:

* ``off``: nothing configured (the default);
* ``no-op``: ``jmspy.telemetry.instrument()`` with the API's no-op tracer and meter
  providers (treated as off: the connection keeps ``_telemetry = None``);
* ``sdk``: the SDK's ``TracerProvider`` with no span processor (the spans are made,
  sampled and ended, and go nowhere: the cost of the instrumentation and the SDK, not
  of an exporter).

Needs opentelemetry-sdk (the ``test`` extra).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

MODES = ("off", "no-op", "sdk")


def _child(mode: str, count: int) -> float:
    """Microseconds per send-and-receive in this process, set up as ``mode``."""
    from jmspy import ConnectionFactory

    if mode != "off":
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.trace import TracerProvider

        import jmspy.telemetry as telemetry

        telemetry.instrument(
            tracer_provider=TracerProvider() if mode == "sdk" else trace.NoOpTracerProvider(),
            meter_provider=metrics.NoOpMeterProvider())
    with ConnectionFactory(f"vm://telemetry-cost-{mode}").create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue("cost")
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        conn.start()
        body = "x" * 100
        make = session.create_text_message
        for _ in range(1000):  # warm-up
            producer.send(make(body))
            consumer.receive(5)
        started = time.perf_counter()
        for _ in range(count):
            producer.send(make(body))
            if consumer.receive(5) is None:
                raise RuntimeError("a message was not received within 5 s")
        return (time.perf_counter() - started) / count * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.telemetry_cost",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(f"{_child(args.child, args.count):.3f}")
        return 0
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for mode in MODES:
            out = subprocess.run([sys.executable, "-m", "benchmarks.telemetry_cost",
                                  "--child", mode, "--count", str(args.count)],
                                 capture_output=True, text=True, check=True).stdout
            best[mode] = min(best.get(mode, float("inf")), float(out))
    print("| set-up | us per message (send + receive) | over off |")
    print("| --- | ---: | ---: |")
    for mode in MODES:
        print(f"| {mode} | {best[mode]:.1f} | {best[mode] - best['off']:+.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
