"""The fields of a client :class:`~jmspy.message.Message` (pure twin).

``Message`` derives from this record and owns everything that happens to the fields; the
record declares them, and has the one reading of them nearly every listener makes per
message, :meth:`MessageRecord.get_property` (compiled, that call runs no Python frame).
The compiled twin (``cython_ext/message_record.pyx``, fields in
``jmspy/_cext/message_record.pxd``) declares the same fields as a ``cdef class``, so the
compiled twins that build and read messages once per message (``vm_convert``,
``message_new``, ``dispatch``) reach them as C fields instead of by attribute lookup.
``tests/test_records_twins.py`` holds both to the same fields and behaviour. Change one,
change the other.

``_body`` is the body of whatever kind the subclass defines (a str, bytes, a dict), kept
here rather than in each subclass so that a converter fills it like any other field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from jmspy.destinations import Destination
    from jmspy.property_value import PropertyValue

__all__ = ["FIELDS", "MessageRecord"]

#: Every field of the record, in the order ``Message.__init__`` sets them.
FIELDS: Final = (
    "message_id",
    "timestamp",
    "correlation_id",
    "reply_to",
    "destination",
    "delivery_mode",
    "expiration",
    "priority",
    "redelivered",
    "jms_type",
    "delivery_time",
    "delivery_count",
    "_properties",
    "_props_read_only",
    "_body_read_only",
    "_acknowledger",
    "_delivery_tag",
    "_body",
)


class MessageRecord:
    """A message's headers, properties, body and delivery bookkeeping, and reading a
    property."""

    __slots__ = FIELDS

    message_id: str | None
    timestamp: int
    correlation_id: str | None
    reply_to: Destination | None
    destination: Destination | None
    delivery_mode: int
    expiration: int
    priority: int
    redelivered: bool
    jms_type: str | None
    delivery_time: int
    delivery_count: int
    _properties: dict[str, PropertyValue]
    _props_read_only: bool
    _body_read_only: bool
    _acknowledger: Callable[[Self], None] | None
    _delivery_tag: int
    #: Its type is the subclass's (TextMessage: str | None, BytesMessage: bytes...).
    _body: Any

    def get_property(self, name: str) -> PropertyValue:
        """The property's value, or None when it is absent."""
        if name == "JMSXDeliveryCount":
            return self.delivery_count
        return self._properties.get(name)
