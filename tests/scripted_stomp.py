"""The scripted STOMP brokers that client tests talk to over a loopback socket: what the
client sends, parsed with jmspy's codec in the server role, :class:`ScriptedBroker`,
which answers CONNECT, SUBSCRIBE and receipts and lets a test write exact bytes, and
:class:`LoopbackServer`, the accept loop of the servers that script each connection."""

from __future__ import annotations

import itertools
import queue
import socket
import threading
from collections.abc import Callable
from typing import Any

from jmspy._speedups import load
from jmspy.stomp_frames import Frame

_codec = load("stomp_codec")


def read_client_frames(sock: socket.socket, on_frame: Callable[[Frame], bool]) -> None:
    """Call ``on_frame`` with each frame the client sends (heart-beats skipped) until it
    returns True, the client closes, or the socket is closed under the loop."""
    parser = _codec.FrameParser("1.2", server=True)
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            return
        if not data:
            return
        parser.feed(data)
        while (frame := parser.next_frame()) is not None:
            if isinstance(frame, Frame) and on_frame(frame):
                return


class LoopbackServer:
    """Listens on 127.0.0.1 (a port chosen at run time) and hands each connection it
    accepts, on a daemon thread, to :meth:`accepted`: at most ``limit`` of them (None:
    until closed). ``close`` closes every accepted socket and the listener, which ends
    the loop. A subclass sets what ``accepted`` reads before calling ``__init__``."""

    def __init__(self, limit: int | None = None) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.socks: list[socket.socket] = []
        self._limit = limit
        threading.Thread(target=self._serve, daemon=True).start()

    def accepted(self, index: int, sock: socket.socket) -> None:
        """Serve the ``index``-th connection (from 0); must not block the accept loop."""
        raise NotImplementedError

    def _serve(self) -> None:
        for index in itertools.count() if self._limit is None else range(self._limit):
            try:
                sock, _ = self.server.accept()
            except OSError:
                return
            self.socks.append(sock)
            self.accepted(index, sock)

    def close(self) -> None:
        for s in [*self.socks, self.server]:
            try:
                s.close()
            except OSError:
                pass


class ScriptedBroker:
    """Accepts one client, answers CONNECT and SUBSCRIBE, then runs ``script(broker)``."""

    def __init__(self, heart_beat: str = "0,0") -> None:
        self.heart_beat = heart_beat
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.sub_id = ""
        self.script: Callable[[ScriptedBroker], None] = lambda b: None
        self.client_frames: queue.Queue[Frame] = queue.Queue()
        self._sock: socket.socket | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"stomp://127.0.0.1:{self.port}"

    def write(self, data: bytes) -> None:
        assert self._sock is not None
        self._sock.sendall(data)

    def message(self, body: bytes, n: int, extra: list[tuple[str, str]] | None = None) -> bytes:
        headers = [("destination", "/queue/q"), ("subscription", self.sub_id),
                   ("message-id", f"m-{n}"), ("ack", f"a-{n}"), *(extra or [])]
        return bytes(_codec.encode_frame(Frame("MESSAGE", headers, body), "1.2"))

    def _serve(self) -> None:
        sock, _ = self._server.accept()
        self._sock = sock
        scripted = False

        def on_frame(frame: Frame) -> bool:
            nonlocal scripted
            self.client_frames.put(frame)
            if frame.command in ("CONNECT", "STOMP"):
                self.write(bytes(_codec.encode_frame(Frame("CONNECTED", [
                    ("version", "1.2"), ("heart-beat", self.heart_beat),
                    ("server", "scripted/1.0")]), "1.2")))
                return False
            receipt = frame.header("receipt")
            if receipt:
                self.write(bytes(_codec.encode_frame(
                    Frame("RECEIPT", [("receipt-id", receipt)]), "1.2")))
            if frame.command == "DISCONNECT":
                sock.close()
                return True
            if frame.command == "SUBSCRIBE" and not scripted:
                self.sub_id = frame.header("id") or ""
                scripted = True
                threading.Thread(target=self.script, args=(self,), daemon=True).start()
            return False

        read_client_frames(sock, on_frame)

    def close(self) -> None:
        """Close the client's socket (shut down first: a close alone leaves it open while
        the serving thread still blocks in ``recv`` on it) and stop listening."""
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for s in (self._sock, self._server):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass


def run_guarded(fn: Callable[[], Any], guard: float) -> Any:
    """Run ``fn`` on a thread and return its result or raise its exception, failing the
    test if it blocks for more than ``guard`` seconds (a hang, not a slow call)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(guard)
    assert not t.is_alive(), f"hung for more than {guard} s"
    if "error" in out:
        raise out["error"]
    return out.get("value")
