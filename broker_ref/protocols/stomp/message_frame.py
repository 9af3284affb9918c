"""The jmspy broker's MESSAGE frame for one delivery, pure-Python twin.

It is the STOMP host's, so it lives here rather than with the client's twins in
``jmspy._pure`` (only the in-process transport may import the broker); it is loaded as
``stomp_message`` of :mod:`.twins`, the STOMP host's registry.

``cython_ext/stomp_message.pyx`` is the compiled twin; both return the same bytes, or
raise the same error, for every message (tests/test_stomp_message_twins.py checks it
with hypothesis). This twin is the reference: it builds the header list
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
