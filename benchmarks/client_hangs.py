"""How long the stomp:// client takes to give up on a misbehaving broker (issue 11, items
9-11): ``python -m benchmarks.client_hangs``.

A scripted server on a loopback port plays each broker: one that accepts TCP and never
answers CONNECT (create_connection with the default connect_timeout and with 2 s); one
that, after the subscription, sends garbage, an oversized frame, invalid UTF-8, or closes
mid-frame (time from the bad bytes to the blocked receive() raising, reconnect off); and
one that never answers DISCONNECT (close() with closeTimeout=2). Times, not asserted.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

from jmspy import ConnectionFactory, JMSException, Session, twins
from jmspy.destinations import Queue
from jmspy.stomp_frames import Frame

_codec = twins.stomp_codec


def encode(command: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
    return bytes(_codec.encode_frame(Frame(command, headers, body), "1.2"))


class Scripted:
    """One connection: CONNECTED and RECEIPTs unless ``silent``; after SUBSCRIBE,
    ``act(sock, sid)``; DISCONNECT is never answered when ``quiet_disconnect``."""

    def __init__(self, act: Callable[[socket.socket, str], None] | None = None, *,
                 silent: bool = False, quiet_disconnect: bool = False) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.act, self.silent, self.quiet = act, silent, quiet_disconnect
        self.acted_at = 0.0
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self.server.accept()
            except OSError:
                return
            self.socks.append(sock)
            if not self.silent:
                threading.Thread(target=self._session, args=(sock,), daemon=True).start()

    def _session(self, sock: socket.socket) -> None:
        parser = _codec.FrameParser("1.2", server=True)
        while True:
            try:
                data = sock.recv(65536)
            except OSError:  # closed by the script
                return
            if not data:
                return
            parser.feed(data)
            while (frame := parser.next_frame()) is not None:
                if not isinstance(frame, Frame):
                    continue
                if frame.command in ("CONNECT", "STOMP"):
                    sock.sendall(encode("CONNECTED", [("version", "1.2")]))
                    continue
                if frame.command == "DISCONNECT" and self.quiet:
                    return
                if frame.header("receipt"):
                    sock.sendall(encode("RECEIPT", [("receipt-id", frame.header("receipt"))]))
                if frame.command == "SUBSCRIBE" and self.act is not None:
                    self.acted_at = time.monotonic()
                    self.act(sock, frame.header("id") or "")

    def close(self) -> None:
        for s in [*self.socks, self.server]:
            s.close()


def message(sid: str, body: bytes) -> bytes:
    return encode("MESSAGE", [("destination", "/queue/q"), ("subscription", sid),
                              ("message-id", "m1"), ("ack", "a1")], body)


CAUSES: dict[str, Callable[[socket.socket, str], None]] = {
    "garbage": lambda s, sid: s.sendall(b"\x16\x03\x01 not STOMP\n\n\0"),
    "oversized frame": lambda s, sid: s.sendall(message(sid, b"x" * 5000)),
    "invalid UTF-8": lambda s, sid: s.sendall(
        b"MESSAGE\ndestination:/queue/q\nsubscription:" + sid.encode()
        + b"\nmessage-id:\xff\n\nx\0"),
    "closed mid-frame": lambda s, sid: (s.sendall(message(sid, b"x")[:30]), s.close()),
}


def main() -> None:
    print("create_connection() against a server that never answers CONNECT:")
    for query in ("", "?connect_timeout=2"):
        srv = Scripted(silent=True)
        start = time.monotonic()
        try:
            ConnectionFactory(f"stomp://127.0.0.1:{srv.port}{query}").create_connection()
        except JMSException as exc:
            print(f"  {query or 'default (10 s)':<20} raised after "
                  f"{time.monotonic() - start:6.2f} s  [{exc.error_code}]")
        srv.close()
    print("blocked receive() after the connection is lost (reconnect off):")
    for name, act in CAUSES.items():
        srv = Scripted(act)
        conn = ConnectionFactory(f"stomp://127.0.0.1:{srv.port}?heartbeat=0&"
                                 "max_frame_bytes=1000").create_connection()
        consumer = conn.create_session(False, Session.CLIENT_ACKNOWLEDGE).create_consumer(
            Queue("q"))
        conn.start()
        try:
            consumer.receive()
        except JMSException as exc:
            print(f"  {name:<20} raised {time.monotonic() - srv.acted_at:6.3f} s after the "
                  f"loss  [{exc.error_code}]")
        conn.close()
        srv.close()
    print("close() against a broker that never answers DISCONNECT:")
    srv = Scripted(lambda s, sid: None, quiet_disconnect=True)
    conn = ConnectionFactory(f"stomp://127.0.0.1:{srv.port}?heartbeat=0",
                             closeTimeout=2).create_connection()
    conn.create_session().create_consumer(Queue("q"))
    start = time.monotonic()
    conn.close()
    print(f"  closeTimeout=2          returned after {time.monotonic() - start:6.2f} s")
    srv.close()


if __name__ == "__main__":
    main()
