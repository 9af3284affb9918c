"""New messages of every type, as the session's ``create_*_message`` makes them (pure
twin).

The compiled twin is ``cython_ext/message_new.pyx`` (``jmspy._cext.message_new``);
``tests/test_message_new_twins.py`` builds messages of every type with both from the same
random bodies and properties (valid and not) and requires the same headers, body and
properties, or the same error. Change one, change the other.

Why a twin: every send creates a message, and ``TextMessage(text, properties)`` is two
Python ``__init__`` frames (the subclass's, then ``Message``'s through ``super()``),
seventeen slot stores and two helper calls per property. This twin *is* each
constructor; the compiled one fills the same fields of a freshly allocated instance and
checks properties with the same rules (the helpers are called for anything their fast
paths would not accept at once, so the errors are theirs).
"""

from __future__ import annotations

from jmspy.message import BytesMessage, MapMessage, Message, TextMessage

__all__ = ["new_bytes_message", "new_map_message", "new_message", "new_text_message"]

# The constructors themselves (no wrapper frame on the pure path).
#: ``new_message(properties=None)``
new_message = Message
#: ``new_text_message(text=None, properties=None)``
new_text_message = TextMessage
#: ``new_bytes_message(data=None, properties=None)``
new_bytes_message = BytesMessage
#: ``new_map_message(values=None, properties=None)``
new_map_message = MapMessage
