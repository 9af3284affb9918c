"""Stub for the compiled twin built from cython_ext/stomp_message.pyx.

Same function as :mod:`jmspy.broker_ref.protocols.stomp.message_frame`.
"""

from jmspy.broker_ref.core.api import ServerMessage

__all__ = ["encode_message"]

def encode_message(
    message: ServerMessage,
    destination: str,
    subscription: str,
    ack: str,
    delivery_count: int,
    reply_to: str | None,
    version: str,
) -> bytes: ...
