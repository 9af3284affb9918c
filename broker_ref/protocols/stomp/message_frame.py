"""The jmspy broker's MESSAGE frame for one delivery.

It had a compiled twin (``cython_ext/stomp_message.pyx``), retired by the twin ledger's
rule (benchmarks/README.md): end to end it made no difference the noise could not
explain (with it pure, ``build_compare --over stomp`` ran 1.05x as fast end to end and
1.10x on the listener path; the broker's own code per message, ``benchmarks.broker_inproc``,
took 25-29 us either way). It builds the header list
(:func:`~jmspy.broker_ref.protocols.stomp.mapping.message_headers`), the body
(``message_body``) and encodes the frame with the STOMP codec; a header the session's
version cannot carry is left out (``carriable_headers``) rather than losing the message.
"""

from __future__ import annotations

from jmspy import twins
from jmspy.stomp_frames import Frame, FrameError

from ...core import ServerMessage
from .mapping import carriable_headers, message_body, message_headers

__all__ = ["encode_message"]

_codec = twins.stomp_codec


def encode_message(
    message: ServerMessage,
    destination: str,
    subscription: str,
    ack: str,
    delivery_count: int,
    reply_to: str | None,
    version: str,
) -> bytes:
    """The encoded MESSAGE frame delivering ``message`` (``ack`` is the ack id; empty
    where the client uses none, ``ack:auto`` or STOMP 1.0/1.1: no ``ack`` header)."""
    headers = message_headers(message, destination, subscription, ack, delivery_count,
                              reply_to)
    body, ctype = message_body(message)
    if ctype is not None:
        headers.append(("content-type", ctype))
    try:
        data: bytes = _codec.encode_frame(Frame("MESSAGE", headers, body), version)
    except FrameError:
        data = _codec.encode_frame(
            Frame("MESSAGE", carriable_headers(headers, version), body), version)
    return data
