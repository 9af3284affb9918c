"""Stub for the compiled twin built from cython_ext/message_new.pyx.

The same calls as :mod:`jmspy._pure.message_new` (the message constructors).
"""

from collections.abc import Mapping

from jmspy.message import BytesMessage, MapMessage, Message, PropertyValue, TextMessage

__all__ = ["new_bytes_message", "new_map_message", "new_message", "new_text_message"]

def new_message(properties: Mapping[str, PropertyValue] | None = None) -> Message: ...
def new_text_message(
    text: str | None = None, properties: Mapping[str, PropertyValue] | None = None
) -> TextMessage: ...
def new_bytes_message(
    data: bytes | None = None, properties: Mapping[str, PropertyValue] | None = None
) -> BytesMessage: ...
def new_map_message(
    values: Mapping[str, PropertyValue | bytes] | None = None,
    properties: Mapping[str, PropertyValue] | None = None,
) -> MapMessage: ...
