"""Helpers: a live STOMP server on 127.0.0.1:<free port>, in a background thread with its
own event loop, and stomp.py clients that are disconnected after each test."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import stomp
from error_log import ErrorLog

from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.core.security import SecurityPolicy
from jmspy.broker_ref.protocols.stomp import StompServer, runner

T = TypeVar("T")


SERVER_ERRORS = ErrorLog()
logging.getLogger("jmspy.broker.stomp").addHandler(SERVER_ERRORS)


def orders_policy(secret: str, audit: str, **orders: list[str]) -> SecurityPolicy:
    """The security tests' policy: alice (role ``traders``, password ``secret``), audrey
    (``auditors``, password ``audit``) and the ``orders.#`` queue permission ``orders``
    (``send=``/``consume=``/``browse=`` role lists). Few PBKDF2 rounds, so connecting
    stays fast."""
    p = SecurityPolicy(iterations=1_000)
    p.add_user("alice", secret, roles=["traders"])
    p.add_user("audrey", audit, roles=["auditors"])
    p.add_permission("orders.#", "queue", **orders)
    return p


class ServerHandle:
    """The broker behind a running server; every call runs on the server's loop thread
    (the core is single-threaded)."""

    def __init__(self, event_loop: str = "asyncio", **options: Any) -> None:
        factory = runner.loop_factory(event_loop) or asyncio.new_event_loop
        self.loop = factory()
        self._ready: Future[tuple[str, int]] = Future()
        self._options = options
        self._stop: asyncio.Event | None = None
        self.server: StompServer | None = None
        self.thread = threading.Thread(target=self._run, name="stomp-test-server", daemon=True)
        self.thread.start()
        self.host, self.port = self._ready.result(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        finally:
            self.loop.close()

    async def _main(self) -> None:
        opts = dict(self._options)
        heartbeat_ms = opts.pop("heartbeat_ms", 50)
        limits = opts.pop("limits", None)
        connection_limits = opts.pop("connection_limits", None)
        self.broker = Broker(name="test", **opts)
        self.server = StompServer(self.broker, limits=limits, heartbeat_ms=heartbeat_ms,
                                  connection_limits=connection_limits)
        self._stop = asyncio.Event()
        try:
            self._ready.set_result(await self.server.start("127.0.0.1", 0))
        except BaseException as exc:
            self._ready.set_exception(exc)
            raise
        await self._stop.wait()
        await self.server.stop()

    def call(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def stats(self, name: str, kind: str = "queue") -> dict[str, Any]:
        from jmspy.broker_ref.core import DestinationKind

        return self.call(lambda: self.broker.stats(name, DestinationKind(kind)).as_dict())

    def connection_count(self) -> int:
        assert self.server is not None
        server = self.server
        return self.call(lambda: len(server.connections))

    def wait_stats(self, name: str, key: str, value: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = self.stats(name)[key]
            except Exception:
                last = None
            if last == value:
                return
            time.sleep(0.01)
        raise AssertionError(f"{name}.{key} is {last}, expected {value}")

    def stop(self) -> None:
        stop = self._stop
        if stop is not None:
            self.loop.call_soon_threadsafe(stop.set)
        self.thread.join(10)


class Collector(stomp.ConnectionListener):  # type: ignore[misc]
    """Collects MESSAGE/RECEIPT/ERROR frames; wait_* poll with short sleeps."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.receipts: list[str] = []
        self.errors: list[Any] = []
        self.disconnected = threading.Event()
        self.lock = threading.Lock()

    def on_message(self, frame: Any) -> None:
        with self.lock:
            self.messages.append(frame)

    def on_receipt(self, frame: Any) -> None:
        with self.lock:
            self.receipts.append(frame.headers["receipt-id"])

    def on_error(self, frame: Any) -> None:
        with self.lock:
            self.errors.append(frame)

    def on_disconnected(self) -> None:
        self.disconnected.set()

    def wait_messages(self, n: int, timeout: float = 5.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.messages) >= n:
                    return list(self.messages)
            time.sleep(0.005)
        raise AssertionError(f"got {len(self.messages)} messages, expected {n}")

    def wait_receipt(self, rid: str, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if rid in self.receipts:
                    return
            time.sleep(0.005)
        raise AssertionError(f"no receipt {rid}")



__all__ = ["SERVER_ERRORS", "Collector", "RawClient", "ServerHandle"]


class RawClient:
    """A socket client speaking raw bytes, reading frames with the codec (client role)."""

    def __init__(self, host: str, port: int, source: str | None = None) -> None:
        """``source``: connect from this loopback address (any 127.x.y.z works)."""
        import socket

        from jmspy import _speedups

        self.codec = _speedups.load("stomp_codec")
        self.sock = socket.create_connection(
            (host, port), timeout=5, source_address=(source, 0) if source else None)
        self.parser = self.codec.FrameParser("1.2", None, False)
        self.heartbeats = 0

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def connect(self, accept: str = "1.2", heart_beat: str = "0,0") -> Any:
        self.send(f"CONNECT\naccept-version:{accept}\nhost:/\nheart-beat:{heart_beat}\n\n\0"
                  .encode())
        return self.read_frame()

    def read_frame(self, timeout: float = 5.0) -> Any:
        """The next frame, or None when the server closed the connection."""
        self.sock.settimeout(timeout)
        while True:
            frame = self.parser.next_frame()
            if frame is self.codec.HEARTBEAT:
                self.heartbeats += 1
                continue
            if frame is not None:
                return frame
            data = self.sock.recv(65536)
            if not data:
                return None
            self.parser.feed(data)

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        """True once the server closes (frames before that are skipped)."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if self.read_frame(max(0.01, deadline - time.monotonic())) is None:
                    return True
        except ConnectionError:
            return True
        except TimeoutError:
            return False
        return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RecordingTransport(asyncio.Transport):
    """An in-process transport under a host connection: records its writes (and
    pause/resume marks) in one log shared by every connection, as (name, bytes)."""

    def __init__(self, name: str, log: list[tuple[str, bytes]]) -> None:
        super().__init__()
        self.name, self.log = name, log

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.log.append((self.name, bytes(data)))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:  # as a socket transport can (fair turns use it)
        self.log.append((self.name, b"(pause_reading)"))

    def resume_reading(self) -> None:
        self.log.append((self.name, b"(resume_reading)"))

    def close(self) -> None:
        pass
