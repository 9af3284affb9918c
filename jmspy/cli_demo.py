"""``jmspy demo``: a producer and a listener consumer over ``vm://``, with the consumer's
flow-control counters printed as the run goes, so a newcomer *sees* Open MQ flow control.

Why paced by default: unpaced, the listener drains 20,000 messages in a few hundredths of
a second and the user gets one row of counters, which shows that flow control exists but
not what it does. With a few milliseconds of work per message the run lasts several
seconds and each row (one a second) shows the window filling to ``imqConsumerFlowLimit``,
draining to the threshold and being topped up again. ``--fast`` keeps the unpaced run (a
throughput figure).

Why a low..high range and not only the current count: the window swings between the
threshold and the limit every couple of seconds, so a once-a-second sample lands at a
random point of that swing and would rarely show either end. The listener itself records
how many messages the client holds each time it starts and ends a message; a row prints
the lowest and highest since the row before.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from jmspy.cli_support import HelpFormatter, at_least

__all__ = ["WindowRange", "add_command", "demo_command"]

#: The paced run (the default) and ``--fast``: messages, ms of work per message, seconds
#: between rows. Paced: 2,000 x 4 ms ~ 8 s, two threshold top-ups of the default window
#: of 1,000 (50 %) and then the last window drained. Fast: the unpaced throughput run.
PACED = (2_000, 4.0, 1.0)
FAST = (20_000, 0.0, 0.1)


class WindowRange:
    """The fewest and most messages the client held (buffered, plus the one the listener
    is working on) since :meth:`take` was last called.

    Sampled by the listener, where the count changes: on entry the client holds the
    buffered messages plus the one in hand (the top of the window right after a top-up);
    on exit only the buffered ones (the bottom, just before a top-up is asked for).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._low: int | None = None
        self._high: int | None = None

    def sample(self, held: int) -> None:
        with self._lock:
            if self._low is None or held < self._low:
                self._low = held
            if self._high is None or held > self._high:
                self._high = held

    def take(self) -> tuple[int, int] | None:
        """(low, high) since the last call, or None if the listener ran no message."""
        with self._lock:
            got = None if self._low is None or self._high is None else (self._low, self._high)
            self._low = self._high = None
            return got


def _what(window: tuple[int, int] | None, limit: int, bottom: int, refills: int,
          fulls: int, waiting: int) -> str:
    """The row's counters in words: what flow control did since the row before.

    ``refills`` top-ups were asked for, the window filled up ``fulls`` times (the broker
    then stops sending), and ``waiting`` messages are still on the broker, undelivered.
    """
    if window is None:
        return ""
    times = f" x{refills}" if refills > 1 else ""
    if refills and fulls:
        return f"down to the threshold ({bottom}), topped up{times}: full again ({limit})"
    if fulls:
        return f"filled to the limit ({limit}): the broker waits"
    if refills and not waiting:
        return f"down to the threshold ({bottom}): asked for more, got what the broker had left"
    if refills:
        return f"down to the threshold ({bottom}): topped up{times}"
    return "draining"


def demo_command(args: argparse.Namespace) -> int:
    from jmspy import ConnectionFactory, Session, _speedups
    from jmspy.transports.vm import stop_broker

    messages, work_ms, interval = FAST if args.fast else PACED
    total = args.messages if args.messages is not None else messages
    work_ms = args.work_ms if args.work_ms is not None else work_ms
    interval = args.interval if args.interval is not None else interval
    limit, threshold = args.limit, args.threshold
    bottom = limit * threshold // 100  # the top-up is asked for at this many held
    factory = ConnectionFactory("vm://demo", imqConsumerFlowLimit=limit,
                                imqConsumerFlowThreshold=threshold)
    done = threading.Event()
    received = 0
    window = WindowRange()
    consumer: Any = None  # set before the listener can run

    def on_message(message: object) -> None:
        nonlocal received
        if work_ms:
            window.sample(consumer.flow_stats().buffered + 1)
            time.sleep(work_ms / 1000.0)  # the simulated work that paces the run
            window.sample(consumer.flow_stats().buffered)
        received += 1
        if received == total:
            done.set()

    twins = "pure Python" if _speedups.PURE_PYTHON else "compiled"
    pace = f"listener {work_ms:g} ms per message" if work_ms else "listener unpaced"
    print(f"jmspy demo: {total:,} messages over vm://demo ({twins} twins), "
          f"imqConsumerFlowLimit={limit}, imqConsumerFlowThreshold={threshold}% "
          f"(top-up at {bottom} held), {pace}", flush=True)
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
        print(f"{'time':>6} {'received':>8} {'buffered':>8} {'held low-high':>13} "
              f"{'top-ups':>7} {'full':>4} {'broker delivering':>17} {'broker queued':>13}"
              "  what happened", flush=True)
        last = (0, 0)  # batches_requested, pauses at the previous row

        def row() -> None:
            nonlocal last
            flow = consumer.flow_stats()
            stats = conn.destination_stats(queue)
            held = window.take()
            span = "-" if held is None else f"{held[0]}-{held[1]}"
            refills = max(0, flow.batches_requested - max(last[0], 1))  # 1st: initial fill
            fulls = flow.pauses - last[1]
            last = (flow.batches_requested, flow.pauses)
            waiting = stats["messageCount"] - stats["deliveringCount"]
            what = _what(held, limit, bottom, refills, fulls, waiting)
            print(f"{time.perf_counter() - started:>5.1f}s {received:>8} {flow.buffered:>8} "
                  f"{span:>13} {flow.batches_requested - 1:>7} {flow.pauses:>4} "
                  f"{stats['deliveringCount']:>17} {stats['messageCount']:>13}  {what}",
                  flush=True)

        while not done.wait(interval):
            row()
        elapsed = time.perf_counter() - started
        row()
        flow = consumer.flow_stats()
        print(f"done: {total} messages in {elapsed:.2f}s ({total / elapsed:,.0f} msgs/s); "
              f"effective limit {flow.limit} set by {flow.limited_by}; "
              f"{flow.batches_requested} batches requested", flush=True)
    stop_broker("demo")  # unregistered too: a second demo in the same process starts afresh
    return 0


def add_command(sub: Any) -> None:
    """Register ``demo`` on ``jmspy``'s sub-parsers."""
    demo = sub.add_parser(
        "demo", help="a producer and a listener over an in-process vm:// broker, printing "
        "the consumer's flow-control counters as it runs", formatter_class=HelpFormatter,
        description="Send messages to a queue of an in-process vm:// broker, consume them "
        "with a listener, and print a row of the consumer's flow-control counters every "
        "interval: the window filling to imqConsumerFlowLimit, draining to the threshold, "
        "topped up again. Nothing to install or start; nothing leaves the process.")
    demo.add_argument("--fast", action="store_true",
                      help=f"no pause in the listener: {FAST[0]:,} messages as fast as they "
                      f"go, a row every {FAST[2]:g} s (default: paced, {PACED[1]:g} ms per "
                      f"message, {PACED[0]:,} messages, a row every {PACED[2]:g} s)")
    demo.add_argument("--messages", type=at_least(1), default=None, metavar="N",
                      help=f"messages to send and receive (default {PACED[0]:,}; "
                      f"{FAST[0]:,} with --fast)")
    demo.add_argument("--limit", type=at_least(1), default=1000, metavar="N",
                      help="imqConsumerFlowLimit: most messages the broker sends ahead")
    demo.add_argument("--threshold", type=at_least(0), default=50, metavar="PERCENT",
                      help="imqConsumerFlowThreshold: more are asked for when the client "
                      "holds this %% of the limit")
    milliseconds = at_least(0, float, "a number of milliseconds", strict=False)
    demo.add_argument("--work-ms", type=milliseconds, default=None, metavar="MS",
                      help=f"simulated work per message in the listener (default "
                      f"{PACED[1]:g}; 0 with --fast)")
    demo.add_argument("--interval", type=at_least(0, float, "a number of seconds"),
                      default=None, metavar="S",
                      help=f"seconds between counter rows (default {PACED[2]:g}; "
                      f"{FAST[2]:g} with --fast)")
    demo.set_defaults(func=demo_command)
