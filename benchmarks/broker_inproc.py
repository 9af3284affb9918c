"""The STOMP broker's own CPU per message: part (c)'s receipt rows without sockets.

``python -m benchmarks.broker_inproc [--workload receipt-auto] [--count 20000] [--runs 5]``

Feeds the bytes raw stomp.py sends in a receipt-per-SEND row (STOMP 1.1: a SEND with a
receipt; with ``ack:client``, the consumer's ACK of each MESSAGE) into two connections of
the broker's STOMP host (``StompServer.protocol()``), whose transports keep what the broker
writes, in one process: the producer's SEND, its RECEIPT, the consumer's MESSAGE and ACK,
checked frame by frame. No system call, no loopback TCP, no event-loop turn, no other
process on the core: what is measured is the broker's own code. Beside
``python -m benchmarks.cpu_split``'s broker CPU per message on the same workload, the
difference is what the running broker pays outside its code (reads and writes, the
loopback path and the wakeups of its peers that a write runs, the event loop, caches the
clients evicted), which a faster broker core cannot remove. The figure includes the
driver's own work per message (making the SEND and the ACK, checking the replies: under
2 us).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from typing import Any

from .common import BODY, median
from .cpu_split import WORKLOADS

__all__ = ["RECEIPT_WORKLOADS", "main", "measure"]

#: cpu_split's workloads whose clients are raw stomp.py (the receipt rows of part c)
RECEIPT_WORKLOADS = tuple(w for w, (_, _, receipts, _) in WORKLOADS.items() if receipts)


class _LastWrite(asyncio.Transport):
    """A transport that keeps the broker's last write and counts the writes."""

    def __init__(self) -> None:
        super().__init__()
        self.last = b""
        self.writes = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.last = bytes(data)
        self.writes += 1

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def expect(data: bytes, command: str, header: str, value: bytes | None = None) -> bytes:
    """The value of ``header`` in the one frame ``data`` holds, if it is a ``command``
    frame (and ``header`` is ``value``, when given); else a RuntimeError that shows the
    frame: a broker that answers otherwise than the workload expects is not measured."""
    head, _, _ = data.partition(b"\n\n")
    lines = head.split(b"\n")
    if lines[0] != command.encode():
        raise RuntimeError(f"expected a {command} frame, the broker wrote {data[:300]!r}")
    prefix = header.encode() + b":"
    for line in lines[1:]:
        if line.startswith(prefix):
            got = line[len(prefix):]
            if value is not None and got != value:
                raise RuntimeError(f"expected {header}:{value.decode()} in the {command} "
                                   f"frame, the broker wrote {data[:300]!r}")
            return got
    raise RuntimeError(f"no {header} header in the {command} frame: {data[:300]!r}")


def _client(server: Any, subscription: bytes = b"") -> tuple[asyncio.Protocol, _LastWrite]:
    conn = server.protocol()
    transport = _LastWrite()
    conn.connection_made(transport)
    conn.data_received(b"CONNECT\naccept-version:1.1\nhost:/\nheart-beat:0,0\n\n\0")
    expect(transport.last, "CONNECTED", "version", b"1.1")
    if subscription:
        conn.data_received(subscription)
    return conn, transport


async def _run(workload: str, count: int) -> float:
    from jmspy.broker_ref.core import Broker
    from jmspy.broker_ref.protocols.stomp.server import StompServer

    ack, window, _, _ = WORKLOADS[workload]
    broker = Broker()
    server = StompServer(broker, heartbeat_ms=0)
    consumer, inbox = _client(server, (
        f"SUBSCRIBE\ndestination:/queue/inproc\nid:1\nack:{ack}\n"
        f"activemq.prefetchSize:{window}\nprefetch-count:{window}\n\n\0").encode())
    producer, receipts = _client(server)
    body = BODY.encode()
    send = b"SEND\ndestination:/queue/inproc\ncontent-length:%d\nreceipt:%%d\n\n%s\0" % (
        len(body), body)
    acking = ack != "auto"
    started = time.perf_counter()
    for i in range(count):
        delivered = inbox.writes
        producer.data_received(send % i)
        expect(receipts.last, "RECEIPT", "receipt-id", b"%d" % i)
        if inbox.writes != delivered + 1:
            raise RuntimeError(f"SEND {i}: the consumer got {inbox.writes - delivered} "
                               "writes, expected its MESSAGE")
        if acking:
            message_id = expect(inbox.last, "MESSAGE", "message-id")
            consumer.data_received(b"ACK\nsubscription:1\nmessage-id:%s\n\n\0" % message_id)
    elapsed = time.perf_counter() - started
    expect(inbox.last, "MESSAGE", "content-length", b"%d" % len(body))
    await server.stop()  # closes both connections and the broker it owns
    return elapsed / count


def measure(workload: str, count: int) -> float:
    """Seconds of the broker's code per message of ``workload`` (one run, fresh broker)."""
    if workload not in RECEIPT_WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; one of {', '.join(RECEIPT_WORKLOADS)}")
    return asyncio.run(_run(workload, count))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.broker_inproc",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=RECEIPT_WORKLOADS, default="receipt-auto")
    ap.add_argument("--count", type=int, default=20_000, help="messages per run")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    measure(args.workload, min(args.count, 2_000))  # warm-up: imports, first allocations
    figures = []
    for rnd in range(args.runs):
        figures.append(measure(args.workload, args.count))
        print(f"run {rnd + 1}: {1e6 * figures[-1]:6.2f} us per message", flush=True)
    from jmspy import _speedups

    build = "all pure" if _speedups.PURE_PYTHON else "compiled"
    print(f"median: {1e6 * median(figures):.2f} us of the broker's code per message "
          f"({args.workload}, {args.count:,} msgs per run, {build})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
