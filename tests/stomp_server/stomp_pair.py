"""STOMP sessions tested without sockets (h11's ``ConnectionPair``).

A :class:`StompPair` is a broker core on a :class:`FakeClock` with any number of
:class:`StompClient`\\ s, each a sans-I/O :class:`StompSession` joined in memory to a client
:class:`FrameParser`. Every call pushes a frame through the session and returns what it
wrote back, so "nothing more arrives" is a fact of the returned list, not a wait; time
passes only when a test calls :meth:`StompPair.advance`. Sockets stay for what is the
STOMP server's own (heart-beats, congestion, closing): see ``stomp_support``.
"""

from __future__ import annotations

from typing import Any

from broker_core.core_support import FakeClock

from jmspy import twins
from jmspy.broker_ref.core import AddressSettings, Broker, DestinationKind
from jmspy.broker_ref.protocols.stomp.protocol import StompSession
from jmspy.stomp_frames import HEARTBEAT, Frame, header_dict

__all__ = ["FakeClock", "StompClient", "StompPair"]

_codec = twins.stomp_codec


class StompClient:
    """One connected client: frames in, the session's answers out."""

    def __init__(self, pair: StompPair, version: str, connect: dict[str, str]) -> None:
        self.pair = pair
        self.version = version
        self.session = StompSession(pair.broker)
        self.parser = _codec.FrameParser(version, None, False)
        #: every MESSAGE received so far, in order
        self.messages: list[Frame] = []
        #: message-id -> bytes of its (latest) MESSAGE frame, as the session wrote it
        self.sizes: dict[str, int] = {}
        #: every other frame received so far (RECEIPT, ERROR...), in order
        self.others: list[Frame] = []
        pair.clients.append(self)
        answer = self.frame("CONNECT", {"accept-version": version, "host": "/", **connect})
        assert [f.command for f in answer] == ["CONNECTED"], answer
        #: the CONNECTED frame's headers
        self.connected = header_dict(answer[0].headers)

    def frame(self, command: str, headers: dict[str, str] | None = None,
              body: bytes = b"") -> list[Frame]:
        """Send one frame; returns every frame the session wrote in answer."""
        frame = Frame(command, list((headers or {}).items()), body)
        self.session.receive_data(_codec.encode_frame(frame, self.version))
        return self.pair.pump()

    def take(self) -> list[Frame]:
        """Frames the session wrote since the last call (recorded on the client too)."""
        data = self.session.data_to_send()
        self.session.written()
        if not data:
            return []
        self.parser.feed(data)
        out: list[Frame] = []
        for f in iter(self.parser.next_frame, None):
            if f is HEARTBEAT:
                continue
            out.append(f)
            (self.messages if f.command == "MESSAGE" else self.others).append(f)
            if f.command == "MESSAGE":
                self.sizes[header_dict(f.headers)["message-id"]] = len(
                    _codec.encode_frame(f, self.version))
        if all(f.command == "MESSAGE" for f in out):  # the sizes are the bytes written
            assert sum(self.sizes[header_dict(f.headers)["message-id"]] for f in out) == len(
                data)
        return out

    # -- the frames tests send most --------------------------------------------------------
    def send(self, destination: str, *bodies: str, **headers: str) -> list[Frame]:
        """SEND each body in order; returns every frame written in answer to them all
        (the deliveries they caused, to any client)."""
        out: list[Frame] = []
        for body in bodies:
            out.extend(self.frame("SEND", {"destination": destination, **headers},
                                  body.encode()))
        return out

    def subscribe(self, destination: str, sid: str, ack: str = "auto",
                  **headers: str) -> list[Frame]:
        return self.frame("SUBSCRIBE", {"destination": destination, "id": sid, "ack": ack,
                                        **headers})

    def ack(self, message: Frame, **headers: str) -> list[Frame]:
        return self.frame("ACK", {**self._names(message), **headers})

    def nack(self, message: Frame, **headers: str) -> list[Frame]:
        return self.frame("NACK", {**self._names(message), **headers})

    def _names(self, message: Frame) -> dict[str, str]:
        """The headers an ACK or NACK of ``message`` names it by, in this version."""
        h = header_dict(message.headers)
        return ({"id": h["ack"]} if self.version == "1.2"
                else {"message-id": h["message-id"], "subscription": h["subscription"]})

    def close(self, receipt: str = "bye") -> list[Frame]:
        """DISCONNECT with a receipt, as stomp.py's ``disconnect()`` does: the session
        answers the RECEIPT and ends, and the broker closes the connection (its unacked
        deliveries go back). Returns what was written in answer, to any client."""
        answer = self.frame("DISCONNECT", {"receipt": receipt})
        assert self.session.closing
        return answer

    def disconnect(self) -> None:
        """The socket went away (no DISCONNECT frame): what the host reports."""
        self.session.connection_lost()
        self.pair.pump()

    def bodies(self) -> list[str]:
        return [m.body.decode() for m in self.messages]


class StompPair:
    """A broker core on a fake clock and the in-memory clients talking to it."""

    def __init__(self, settings: dict[str, AddressSettings] | None = None,
                 **broker: Any) -> None:
        """``broker``: further keyword arguments of the :class:`Broker` (memory_limit...)."""
        self.clock = FakeClock()
        self.broker = Broker(settings=settings, clock=self.clock, **broker)
        self.clients: list[StompClient] = []

    def client(self, version: str = "1.2", **connect: str) -> StompClient:
        """A connected client; ``connect``: extra CONNECT headers."""
        return StompClient(self, version, connect)

    def pump(self) -> list[Frame]:
        """Take what every session wrote (a frame to one session may deliver to others;
        taking frames refills ``ack:auto`` windows, so repeat until all are quiet)."""
        out: list[Frame] = []
        while True:
            got = [f for c in self.clients for f in c.take()]
            if not got:
                return out
            out.extend(got)

    def advance(self, ms: int) -> list[Frame]:
        """Let ``ms`` pass: run the broker's due timers, then take what that delivered."""
        self.clock.advance(ms)
        self.broker.process_timers()
        return self.pump()

    def stats(self, name: str, kind: str = "queue") -> dict[str, Any]:
        return self.broker.stats(name, DestinationKind(kind)).as_dict()
