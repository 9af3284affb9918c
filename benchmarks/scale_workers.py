"""Load generators of the scaling part (part_f_scaling.py): many raw stomp.py connections
in one worker process, and plain sockets for what only has to exist (idle connections,
idle queues).

``python -m benchmarks.scale_workers '<json spec>'``; roles:

* ``swarm-consumer``: ``connections`` stomp.py connections; destination ``i`` of
  ``pattern.format(i=i)`` for ``i < n`` is subscribed on connection ``i % connections``
  (``every``: every connection subscribes to all ``n``: fan-out). Each connection's last
  SUBSCRIBE carries a receipt, and READY is printed once all receipts are in, so no
  message is sent to a topic before its subscribers are there. Reports the count, the
  last receive time and p50/p99/p99.9 of receive minus the ``ts`` header. Past
  :data:`PER_PROCESS` connections the swarm is spread over processes (READY once all
  are subscribed; their counts and latencies merged).
* ``swarm-producer``: ``connections`` stomp.py connections; message ``k`` of ``count``
  goes to destination ``k % n`` (``pattern.format(i=k % n, m=k % n % mod)``) over
  connection ``k % connections``, ``size`` bytes, from one thread
  (a client's sends are writes on the caller's thread either way).
  ``rate`` set: **open loop**, message ``k`` is due at ``start + k / rate`` and its ``ts``
  is that due time, not the time it left, so a broker that stalls the producer (TCP
  backpressure) is charged for the whole stall (no coordinated omission).

A producer process holds up to a thousand connections, one stomp.py receiver thread per
connection, a consumer process a hundred; the same generator serves every broker, so a
ratio compares brokers. Thread stacks are kept small so that a thousand of them cost little.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import socket
import threading
import time
from typing import Any

from .common import Spec, now, percentile, signal_ready, worker_main
from .workers import _Sink

threading.stack_size(512 * 1024)


def _raise_nofile() -> None:
    """Up to the hard limit: 1,000 connections need more descriptors than a soft 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _connection(spec: Spec, listener: Any) -> Any:
    import stomp

    conn = stomp.Connection12([(spec["host"], spec["port"])], heartbeats=(0, 0),
                              vhost=spec.get("vhost"), auto_content_length=True)
    conn.set_listener("scale", listener)
    conn.connect(wait=True)
    return conn


def _connect_all(spec: Spec, listeners: list[Any]) -> list[Any]:
    _raise_nofile()
    return [_connection(spec, listener) for listener in listeners]


class _Counter(_Sink):
    """Deliveries across every connection's receiver thread: the sink of the pair
    workers, counted under a lock (many receiver threads hit it at once)."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self._lock = threading.Lock()

    def hit(self, sent: float | None) -> None:
        with self._lock:
            super().hit(sent)


#: Consumer connections one process holds at most: past a hundred stomp.py receiver threads
#: in one interpreter, their contention for the GIL costs more than the broker does (at
#: 1,000 connections in one process about 0.8 ms of the generator's CPU per message
#: against the broker's 0.04 ms), so a wider swarm is spread over processes.
PER_PROCESS = 100


def _expected(spec: Spec, mine: list[int]) -> int:
    """Deliveries to connections ``mine`` of a swarm of ``spec``: fan-out, each gets
    every message; otherwise the messages of the destinations those connections own
    (message ``k`` of ``count`` goes to destination ``k % n``)."""
    width, n, count = spec["connections"], spec["n"], spec["count"]
    if spec.get("every"):
        return count // width * len(mine)
    owned = [i for i in range(n) if i % width in set(mine)]
    return sum(count // n + (1 if i < count % n else 0) for i in owned)


def _consume(spec: Spec, mine: list[int], ready: Any) -> dict[str, Any]:
    """Connections ``mine`` of the swarm: subscribe, ``ready()`` once every RECEIPT is
    in, then count; the result keeps the raw latencies for the caller to merge."""
    import stomp

    counter = _Counter(_expected(spec, mine))
    n, width = spec["n"], spec["connections"]
    window = str(spec.get("window", 1000))
    receipts = threading.Semaphore(0)
    errors: list[str] = []

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            counter.hit(float(frame.headers["ts"]))

        def on_receipt(self, frame: Any) -> None:
            receipts.release()

        def on_error(self, frame: Any) -> None:
            errors.append(frame.body or str(frame.headers.get("message")))

    conns = _connect_all(spec, [Listener() for _ in mine])
    headers = {"activemq.prefetchSize": window, "prefetch-count": window}
    waits = 0
    for j, conn in zip(mine, conns, strict=True):
        owned = range(n) if spec.get("every") else range(j, n, width)
        last = owned[-1] if len(owned) else None
        waits += last is not None
        for i in owned:
            extra = {**headers, "receipt": f"sub-{j}"} if i == last else headers
            conn.subscribe(destination=spec["pattern"].format(i=i), id=str(i), ack="auto",
                           headers=extra)
    for _ in range(waits):
        if not receipts.acquire(timeout=spec.get("timeout", 120)):
            return {"error": "a SUBSCRIBE's RECEIPT did not come"
                             + (f": {errors[0][:200]}" if errors else "")}
    ready()
    result = counter.result(spec.get("timeout", 120))
    if errors and "error" in result:
        result["error"] += f"; the broker said: {errors[0][:200]}"
    result["latencies"] = counter.latencies
    for conn in conns:
        conn.disconnect()
    return result


def _slice_main(spec: Spec, mine: list[int], out: Any) -> None:
    """One process of a spread swarm: ``READY`` and then the result through ``out``."""
    try:
        out.put(_consume(spec, mine, lambda: out.put("READY")))
    except Exception as exc:  # reported to the parent, which reports it as the row's
        out.put({"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]})
    out.close()
    out.join_thread()
    os._exit(0)  # do not wait for stomp.py's receiver threads


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [p["error"] for p in parts if "error" in p]
    if errors:
        return {"error": errors[0]}
    lat = [x for p in parts for x in p["latencies"]]
    return {"count": sum(p["count"] for p in parts), "t_last": max(p["t_last"] for p in parts),
            "p50_ms": percentile(lat, 50) * 1e3, "p99_ms": percentile(lat, 99) * 1e3,
            "p999_ms": percentile(lat, 99.9) * 1e3}


def swarm_consumer(spec: Spec) -> dict[str, Any]:
    width, most = spec["connections"], spec.get("per_process", PER_PROCESS)
    if width <= most:
        return _merge([_consume(spec, list(range(width)), signal_ready)])
    spread = -(-width // most)  # processes; connection j lives in process j % spread
    ctx = multiprocessing.get_context("fork")  # no thread exists yet: stomp.py is not loaded
    out = ctx.Queue()
    procs = [ctx.Process(target=_slice_main, args=(spec, list(range(p, width, spread)), out))
             for p in range(spread)]
    for proc in procs:
        proc.start()
    got: list[dict[str, Any]] = []
    ready = 0
    try:
        while len(got) < spread and not any("error" in g for g in got):
            item = out.get(timeout=spec.get("timeout", 120) + 60)
            if item != "READY":
                got.append(item)
            else:
                ready += 1
                if ready == spread:
                    signal_ready()
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
    return _merge(got)


def swarm_producer(spec: Spec) -> dict[str, Any]:
    import stomp

    conns = _connect_all(spec, [stomp.ConnectionListener()
                                for _ in range(spec["connections"])])
    mod = int(spec.get("mod", 1))
    dests = [spec["pattern"].format(i=i, m=i % mod) for i in range(spec["n"])]
    body = "x" * int(spec.get("size", 100))
    count, rate = spec["count"], spec.get("rate")
    width, n = len(conns), len(dests)
    t_start = now()
    if rate:
        gap = 1.0 / rate
        for k in range(count):
            due = t_start + k * gap
            ahead = due - now()
            if ahead > 0:
                time.sleep(ahead)  # until message k is due (open loop)
            conns[k % width].send(destination=dests[k % n], body=body,
                                  headers={"ts": repr(due)})
    else:
        for k in range(count):
            conns[k % width].send(destination=dests[k % n], body=body,
                                  headers={"ts": repr(now())})
    sent_for = now() - t_start
    for conn in conns:
        conn.disconnect()
    return {"t_start": t_start, "send_s": sent_for}


# -- plain sockets: connections and queues that only have to exist -------------------------
def _frame(command: str, headers: dict[str, str]) -> bytes:
    head = "".join(f"{k}:{v}\n" for k, v in headers.items())
    return f"{command}\n{head}\n".encode() + b"\0"


def _read_until(sock: socket.socket, marker: bytes, what: str) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"the broker closed the connection before {what}: {data[:200]!r}")
        data += chunk
        if data.startswith(b"ERROR"):
            raise RuntimeError(f"the broker refused {what}: {data[:300]!r}")
    return data


def stomp_socket(host: str, port: int, vhost: str | None) -> socket.socket:
    """A STOMP 1.2 connection without heart-beats on a plain socket: CONNECT, CONNECTED."""
    sock = socket.create_connection((host, port), timeout=60)
    sock.sendall(_frame("CONNECT", {"accept-version": "1.2", "host": vhost or host,
                                    "heart-beat": "0,0"}))
    _read_until(sock, b"\0", "CONNECTED")
    return sock


def open_idle(host: str, port: int, count: int, vhost: str | None) -> list[socket.socket]:
    """``count`` connected, silent STOMP connections, owned by the caller."""
    _raise_nofile()
    return [stomp_socket(host, port, vhost) for _ in range(count)]


def create_queues(host: str, port: int, vhost: str | None, prefix: str, first: int,
                  count: int, batch: int = 1000) -> None:
    """Queues ``prefix.<first>`` ... made to exist and left idle: each is subscribed to
    and unsubscribed from (no message, no consumer left), a batch of SUBSCRIBE /
    UNSUBSCRIBE frames written at once with a RECEIPT asked on the batch's last frame."""
    sock = stomp_socket(host, port, vhost)
    try:
        for start in range(first, first + count, batch):
            frames = []
            stop = min(start + batch, first + count)
            for i in range(start, stop):
                frames.append(_frame("SUBSCRIBE", {"destination": f"/queue/{prefix}.{i}",
                                                   "id": str(i), "ack": "auto"}))
                headers = {"id": str(i)}
                if i == stop - 1:
                    headers["receipt"] = f"q{i}"
                frames.append(_frame("UNSUBSCRIBE", headers))
            sock.sendall(b"".join(frames))
            _read_until(sock, f"receipt-id:q{stop - 1}".encode(), f"queue {prefix}.{stop - 1}")
        sock.sendall(_frame("DISCONNECT", {}))
    finally:
        sock.close()


ROLES = {"swarm-consumer": swarm_consumer, "swarm-producer": swarm_producer}

if __name__ == "__main__":
    worker_main(ROLES)
