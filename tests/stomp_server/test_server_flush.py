"""When the asyncio host writes what one client's frames produced for other clients.

These drive the host's connection objects with recording transports on a real event
loop, without sockets: what was written, in which order, and whether it took a loop turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.stomp.server import StompServer, _Connection


class _Recording(asyncio.Transport):
    """A transport that records writes (in one log shared by every connection)."""

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

    def close(self) -> None:
        pass


def _frame(command: str, **headers: str) -> bytes:
    lines = "".join(f"{k.replace('_', '-')}:{v}\n" for k, v in headers.items())
    return f"{command}\n{lines}\n".encode() + b"\0"


def _client(server: StompServer, name: str, log: list[tuple[str, bytes]]) -> _Connection:
    conn = _Connection(server)
    conn.connection_made(_Recording(name, log))
    conn.data_received(_frame("CONNECT", accept_version="1.2", host="/", heart_beat="0,0"))
    return conn


def _commands(log: list[tuple[str, bytes]]) -> list[tuple[str, str]]:
    return [(name, data.split(b"\n", 1)[0].decode()) for name, data in log]


async def _one_send(
    broker: Broker, probe: Callable[[], object] = lambda: None, **send: str,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], object]:
    """A consumer subscribed (``ack:auto``) to ``/queue/q`` and a producer: what had been
    written when the producer's SEND (``send``: more headers; a receipt) returned from
    data_received, ``probe()`` at that moment, and what had been written one loop turn
    later."""
    server = StompServer(broker, heartbeat_ms=0)
    log: list[tuple[str, bytes]] = []
    consumer = _client(server, "consumer", log)
    consumer.data_received(_frame("SUBSCRIBE", destination="/queue/q", id="s", ack="auto"))
    producer = _client(server, "producer", log)
    log.clear()
    producer.data_received(_frame("SEND", destination="/queue/q", receipt="r1", **send))
    before, probed = _commands(log), probe()
    await asyncio.sleep(0)  # one loop turn: the flush callbacks scheduled meanwhile run
    after = _commands(log)
    for conn in (consumer, producer):
        conn.close()
    broker.close()
    return before, after, probed


def test_a_send_is_delivered_to_other_clients_before_the_loop_turns() -> None:
    """The RECEIPT goes to the producer first, then the MESSAGE to the consumer, both
    written within the producer's data_received: no flush callback a loop turn later
    (on asyncio's loop that turn was one more epoll_wait and _run_once per message)."""
    before, after, _ = asyncio.run(_one_send(Broker(name="flush")))
    assert before == after == [("producer", "RECEIPT"), ("consumer", "MESSAGE")]


def test_with_a_group_commit_pending_nothing_is_written_before_the_loop_turn(
    tmp_path: Any,
) -> None:
    """A persistent SEND's RECEIPT and its delivery wait for the flush callback, whose
    first run commits the writes of every connection read in that loop turn (one commit
    for all): writing the delivery at the end of data_received would commit early."""
    from jmspy.broker_ref.core.sqlite_store import SqliteStore

    store = SqliteStore(tmp_path / "m.sqlite", group_commit=True)
    before, after, pending = asyncio.run(
        _one_send(Broker(name="flush", store=store), lambda: store.pending,
                  persistent="true"))
    assert pending and before == []
    assert after == [("producer", "RECEIPT"), ("consumer", "MESSAGE")]
