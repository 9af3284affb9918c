"""Stub for the compiled twin built from cython_ext/message_new.pyx.

Same call as :data:`jmspy._pure.message_new.new_text_message` (``TextMessage(...)``).
"""

from collections.abc import Mapping

from jmspy.message import PropertyValue, TextMessage

__all__ = ["new_text_message"]

def new_text_message(
    text: str | None = None, properties: Mapping[str, PropertyValue] | None = None
) -> TextMessage: ...
