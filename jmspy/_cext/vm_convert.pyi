"""Stub for the compiled twin built from cython_ext/vm_convert.pyx.

Same functions as :mod:`jmspy.transports.vm_convert` (the pure twin).
"""

from collections.abc import Callable

from jmspy.broker_ref.core.api import DestinationKind, ServerMessage
from jmspy.destinations import Destination
from jmspy.message import Message

__all__ = [
    "DeliverMany",
    "dest_key",
    "to_client_message",
    "to_client_messages",
    "to_destination",
    "to_server_message",
]

def dest_key(destination: Destination) -> tuple[DestinationKind, str]: ...
def to_destination(kind: DestinationKind, name: str) -> Destination: ...
def to_server_message(message: Message, connection_id: int) -> ServerMessage: ...
def to_client_message(sm: ServerMessage, delivery_tag: int = -1, count: int = 1) -> Message: ...
def to_client_messages(
    messages: list[ServerMessage], first_tag: int, counts: list[int]
) -> list[Message]: ...

class DeliverMany:
    on_deliveries: Callable[[int, int, list[Message]], None]
    def __init__(self, on_deliveries: Callable[[int, int, list[Message]], None]) -> None: ...
    def __call__(
        self, consumer_id: int, first_tag: int, messages: list[ServerMessage], counts: list[int]
    ) -> None: ...
