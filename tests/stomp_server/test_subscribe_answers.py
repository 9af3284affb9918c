"""What a SUBSCRIBE (or SEND) is answered with, in the order RabbitMQ and ActiveMQ use.

* The RECEIPT of a SUBSCRIBE comes before the first MESSAGE that subscription delivers,
  even when the queue already holds messages: a client that subscribes, waits for the
  receipt and only then expects messages (RabbitMQ's own STOMP suite does) sees them.
* A destination that is a known prefix with no name after it (``/queue``, ``/queue/``,
  ``/topic``, ``/topic/``...) is refused as an empty destination name, not as an unknown
  prefix, which would send the user looking for a typo that is not there.

Sans-I/O sessions on one broker, and the same over a socket to the asyncio server.
"""

from __future__ import annotations

from typing import Any

import pytest
from stomp_support import RawClient, ServerHandle

from jmspy import twins
from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.stomp.protocol import StompSession

_codec: Any = twins.stomp_codec


class _Client:
    """A connected sans-I/O session: bytes in, the frames it answered out."""

    def __init__(self, broker: Broker) -> None:
        self.session = StompSession(broker)
        assert [f.command for f in self.send(
            b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")] == ["CONNECTED"]

    def send(self, data: bytes) -> list[Any]:
        self.session.receive_data(data)
        parser = _codec.FrameParser("1.2", None, False)
        parser.feed(self.session.data_to_send())
        self.session.written()
        return list(iter(parser.next_frame, None))


def _filled(count: int) -> Broker:
    broker = Broker(name="answers")
    producer = _Client(broker)
    for i in range(count):
        producer.send(f"SEND\ndestination:/queue/q\n\nm{i}\0".encode())
    return broker


@pytest.mark.parametrize("ack", ["auto", "client", "client-individual"])
def test_the_receipt_of_a_subscribe_comes_before_the_messages_it_delivers(ack: str) -> None:
    consumer = _Client(_filled(3))
    frames = consumer.send(
        f"SUBSCRIBE\nid:s\ndestination:/queue/q\nack:{ack}\nreceipt:sub\n\n\0".encode())
    assert [(f.command, f.header("receipt-id")) for f in frames] == [
        ("RECEIPT", "sub"), ("MESSAGE", None), ("MESSAGE", None), ("MESSAGE", None)]
    assert [f.body for f in frames[1:]] == [b"m0", b"m1", b"m2"]


def test_a_refused_subscribe_gets_its_error_and_no_receipt() -> None:
    consumer = _Client(_filled(1))
    frames = consumer.send(b"SUBSCRIBE\nid:s\ndestination:/queue/q\nack:bogus\n"
                           b"receipt:sub\n\n\0")
    assert [f.command for f in frames] == ["ERROR"]
    assert frames[0].header("receipt-id") == "sub"


def test_over_a_socket_the_subscribe_receipt_is_read_before_the_first_message(
    server: ServerHandle,
) -> None:
    with RawClient(server.host, server.port) as producer, \
            RawClient(server.host, server.port) as consumer:
        assert producer.connect().command == "CONNECTED"
        for i in range(3):
            producer.send(f"SEND\ndestination:/queue/r\nreceipt:p{i}\n\nm{i}\0".encode())
            assert producer.read_frame().command == "RECEIPT"
        assert consumer.connect().command == "CONNECTED"
        consumer.send(b"SUBSCRIBE\nid:s\ndestination:/queue/r\nreceipt:sub\n\n\0")
        first = consumer.read_frame()
        assert (first.command, first.header("receipt-id")) == ("RECEIPT", "sub")
        assert [consumer.read_frame().body for _ in range(3)] == [b"m0", b"m1", b"m2"]


@pytest.mark.parametrize("destination", [
    "/queue", "/queue/", "/topic", "/topic/", "/temp-queue", "/remote-temp-queue",
    "/amq/queue"])
@pytest.mark.parametrize("command", ["SEND", "SUBSCRIBE"])
def test_a_prefix_without_a_name_is_an_empty_destination_name(
    command: str, destination: str,
) -> None:
    client = _Client(Broker(name="answers"))
    frames = client.send(
        f"{command}\nid:s\ndestination:{destination}\nreceipt:r\n\nx\0".encode())
    assert [f.command for f in frames] == ["ERROR"]
    message = frames[0].header("message")
    assert message.startswith("empty ") and "name" in message, message
    assert "unknown destination prefix" not in message
    assert "name after" in frames[0].body.decode()  # says how to fix it
    assert client.session.closing


def test_a_mistyped_prefix_is_still_an_unknown_prefix() -> None:
    client = _Client(Broker(name="answers"))
    (error,) = client.send(b"SEND\ndestination:/queues\n\nx\0")
    assert error.header("message") == "unknown destination prefix '/queues' in '/queues'"


def test_over_a_socket_a_send_to_bare_queue_is_an_empty_destination_name(
    server: ServerHandle,
) -> None:
    with RawClient(server.host, server.port) as client:
        assert client.connect().command == "CONNECTED"
        client.send(b"SEND\ndestination:/queue\n\nx\0")
        error = client.read_frame()
        assert error.command == "ERROR"
        assert error.header("message") == "empty destination name in '/queue'"
        assert client.closed_by_server()
