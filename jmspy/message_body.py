"""A message's body as the type the caller asks for (JMS 2.0's ``getBody(Class)``).

Why a module of its own: ``consumer.receive_body(str)`` and the simplified API's
``JMSConsumer.receive_body`` must agree on which body fits which type, and on refusing a
body of another type with ``MessageFormatException`` (JMS 2.0's rule) rather than handing
back something the caller's types say it is not.

A TextMessage's body is a ``str``, a BytesMessage's ``bytes``, a MapMessage's a ``dict``
(a copy: the caller may change it), and ``object`` takes any of them. A message with no
body (a plain :class:`~jmspy.message.Message`, or a TextMessage whose text is None) has
None for every type.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from .errors import MessageFormatException
from .message import BytesMessage, MapMessage, Message, TextMessage

__all__ = ["BODY_TYPES", "body_as", "check_body_type"]

T = TypeVar("T")

#: The types a body can be asked for as.
BODY_TYPES: tuple[type, ...] = (str, bytes, dict, object)


def check_body_type(body_type: type) -> None:
    """Refuse, before anything is received, a type no message body can be."""
    if body_type not in BODY_TYPES:
        raise MessageFormatException(
            f"a message body can be asked for as str (TextMessage), bytes (BytesMessage), "
            f"dict (MapMessage) or object (any of them), not {body_type!r}")


def body_as(message: Message, body_type: type[T]) -> T | None:
    """``message``'s body as ``body_type``; MessageFormatException if it is another."""
    body: Any
    kind: type
    if isinstance(message, TextMessage):
        body, kind = message.text, str
    elif isinstance(message, BytesMessage):
        body, kind = message.body, bytes
    elif isinstance(message, MapMessage):
        body, kind = dict(message.map), dict
    else:
        return None  # no body: None whatever the type asked for
    if body is None:
        return None
    if body_type is not object and body_type is not kind:
        raise MessageFormatException(
            f"the message {message.message_id} is a {type(message).__name__}, whose body is "
            f"{kind.__name__}, not {body_type.__name__}; ask for "
            f"receive_body({kind.__name__}) (or object), or use receive() and check the type")
    return cast(T, body)
