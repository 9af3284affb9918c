"""JMS property values that travel as text with a one-letter type code.

STOMP headers and MQTT 5 user properties are strings. jmspy's mappings send a property's
text and, for a property that is not a string, its code (``i``, ``f`` or ``b``, in the
``jmspy-jms`` STOMP header or the MQTT ``jmspy-h`` user property), and read the value
back from the two. One table for both directions and both transports, so a code means
the same everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from jmspy.message import PropertyValue

__all__ = ["TYPE_CODES", "typed"]

#: The code a property value of each non-string type travels with.
TYPE_CODES: Final = {bool: "b", int: "i", float: "f"}


def typed(raw: str, code: str | None) -> PropertyValue:
    """The value of a property whose text is ``raw`` and whose code is ``code`` (a string
    when there is no code or one this version does not know). Raises ValueError when
    the text is not a number of its code's type; the caller keeps the text then."""
    if code == "i":
        return int(raw)
    if code == "f":
        return float(raw)
    if code == "b":
        return raw.lower() == "true"
    return raw
