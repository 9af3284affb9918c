"""A new TextMessage, as ``session.create_text_message`` makes it (pure twin).

The compiled twin is ``cython_ext/message_new.pyx`` (``jmspy._cext.message_new``);
``tests/test_message_new_twins.py`` builds messages with both from the same random texts
and properties (valid and not) and requires the same headers, body and properties, or
the same error. Change one, change the other.

Why a twin: every send creates a message, and ``TextMessage(text, properties)`` is two
Python ``__init__`` frames (the subclass's, then ``Message``'s through ``super()``),
seventeen slot stores and two helper calls per property. This twin *is* that
constructor; the compiled one fills the same slots of a freshly allocated instance and
checks properties with the same rules (the helpers are called for anything their fast
paths would not accept at once, so the errors are theirs).
"""

from __future__ import annotations

from jmspy.message import TextMessage

__all__ = ["new_text_message"]

#: ``new_text_message(text=None, properties=None)``: the constructor itself (no wrapper
#: frame on the pure path).
new_text_message = TextMessage
