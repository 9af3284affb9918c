"""recover() while the broker still has MESSAGE frames on the way to the client.

The broker may send messages before it reads the client's NACKs; they sit in the socket
or wait for stomp.py's receiver thread. Here that moment is made certain: the receiver
thread is held before it hands message "3" onwards to the transport, recover() runs, and
only then are the held frames let through. What the application sees afterwards must be
the full queue in order, with only the messages it saw marked redelivered -- on RabbitMQ
too, which marks every requeued message ``redelivered:true``.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from conftest import TARGETS, Target
from polling import wait_until

from jmspy import Session

WAIT = 10.0


def _hold_receiver(transport: Any, hold_from: str) -> tuple[threading.Event, list[bytes]]:
    """Make stomp.py's receiver thread wait, before the transport sees it, on the first
    MESSAGE whose body is ``hold_from`` (and so on every frame after it) until the
    returned event is set; the list collects the bodies held so far."""
    gate = threading.Event()
    holding: list[bytes] = []

    def hold(body: bytes) -> None:
        if body == hold_from.encode() or holding:
            holding.append(body)
            gate.wait(30)

    reader = transport._reader  # jmspy's frame reader hands each MESSAGE on (stomp/receive.py)
    if reader is None:  # the public path: stomp.py hands each MESSAGE to jmspy's listener
        receiver = transport._conn.get_listener("jmspy")
        original_frame = receiver.on_message

        def on_frame(frame: Any) -> None:
            hold(frame.body)
            original_frame(frame)

        receiver.on_message = on_frame
        return gate, holding
    original = reader._on_message

    def on_message(headers: dict[str, str], body: bytes) -> None:
        hold(body)
        original(headers, body)

    reader._on_message = on_message
    return gate, holding


# vm:// has no frames in flight between broker and client: the STOMP targets only.
@pytest.mark.parametrize("target", [t for t in TARGETS if t.startswith("stomp-")],
                         indirect=True)
def test_recover_with_messages_in_flight_keeps_order_and_flags(target: Target) -> None:
    f = target.make_factory()
    name = f"interop.inflight.{uuid.uuid4().hex[:10]}"
    with f.create_connection() as conn:
        s = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        c = s.create_consumer(s.create_queue(name))
        # Held only now: create_consumer waits for its SUBSCRIBE's RECEIPT, which the
        # same receiver thread delivers.
        gate, held = _hold_receiver(conn._transport, "3")
        with f.create_connection() as producer_conn:
            ps = producer_conn.create_session()
            p = ps.create_producer(ps.create_queue(name))
            for i in range(6):
                p.send(ps.create_bytes_message(str(i).encode()))
        conn.start()
        first = [c.receive(WAIT) for _ in range(3)]
        assert [m.body for m in first] == [b"0", b"1", b"2"]
        wait_until(lambda: held, WAIT)  # until "3" is on its way: then the race is real
        assert held == [b"3"]
        s.recover()  # "3", "4", "5" are still on their way to the transport
        gate.set()
        again = [c.receive(WAIT) for _ in range(6)]
        assert [m.body if m else None for m in again] == [str(i).encode() for i in range(6)]
        assert [m.redelivered for m in again] == [True] * 3 + [False] * 3
        again[-1].acknowledge()
        c.close()
        leftover = s.create_consumer(s.create_queue(name))
        assert leftover.receive(0.5) is None
