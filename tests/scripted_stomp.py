"""The read loop of the scripted STOMP brokers that client tests talk to over a loopback
socket: what the client sends, parsed with jmspy's codec in the server role."""

from __future__ import annotations

import socket
from collections.abc import Callable

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
