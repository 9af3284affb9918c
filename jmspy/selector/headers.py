"""Which ``JMS...`` identifiers a selector may read: the parser's check and the
evaluator's lookups (:mod:`jmspy.selector.evaluate` decides at compile time how an
identifier is looked up) read the one rule.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DELIVERY_MODE",
    "DELIVERY_MODE_NAMES",
    "NULL_HEADERS",
    "SELECTABLE_HEADERS",
    "is_always_null",
]

#: Header fields the spec allows in selectors; their values come from the getter.
SELECTABLE_HEADERS: Final = frozenset(
    {
        "JMSDeliveryMode",
        "JMSPriority",
        "JMSMessageID",
        "JMSTimestamp",
        "JMSCorrelationID",
        "JMSType",
    }
)

#: Header fields the spec does not allow in selectors. They, and any other ``JMS...``
#: name that is neither a selectable header nor a ``JMSX``/``JMS_`` property, are NULL:
#: the getter is never asked for them.
NULL_HEADERS: Final = frozenset(
    {"JMSDestination", "JMSReplyTo", "JMSRedelivered", "JMSExpiration", "JMSDeliveryTime"}
)

#: The one header whose value is normalised before comparing (see the twins).
DELIVERY_MODE: Final = "JMSDeliveryMode"

#: JMS DeliveryMode constants, for getters that hand back the int instead of the name.
DELIVERY_MODE_NAMES: Final[dict[int, str]] = {1: "NON_PERSISTENT", 2: "PERSISTENT"}


def is_always_null(name: str) -> bool:
    """True for a ``JMS...`` name a selector may not read: it is NULL on every message."""
    return name.startswith("JMS") and not (
        name in SELECTABLE_HEADERS or name.startswith("JMSX") or name.startswith("JMS_")
    )
