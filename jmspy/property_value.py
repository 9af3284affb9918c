"""The values a message property may hold (JMS's boolean, integer, floating-point and
string properties, or None for an absent one).

Its own module, at the bottom of the client: the message record that stores properties
(:mod:`jmspy._pure.message_record`) sits below :mod:`jmspy.message`, which derives from
it, so the type both name cannot live in either."""

from __future__ import annotations

__all__ = ["PropertyValue"]

PropertyValue = bool | int | float | str | None
