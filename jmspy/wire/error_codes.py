"""The stable codes of the broker's refusals, and the header that carries one.

The broker core gives each of its exception classes one of these codes; over STOMP the
broker names the refusing class's code in an ERROR frame's :data:`ERROR_CODE_HEADER`,
and the client maps the code to its JMS exception class without reading the (human,
changeable) text. Both sides take the strings from here, so they cannot drift apart;
a code once published keeps its spelling, since older clients match on it.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACCESS_DENIED",
    "AUTHENTICATION_FAILED",
    "BROKER_ERROR",
    "CODES",
    "DESTINATION_NOT_FOUND",
    "ERROR_CODE_HEADER",
    "ILLEGAL_STATE",
    "INVALID_CLIENT_ID",
    "INVALID_DESTINATION",
    "INVALID_SELECTOR",
    "INVALID_SUBSCRIPTION",
    "RESOURCE_LIMIT_EXCEEDED",
    "TRANSACTION_ERROR",
]

#: The ERROR frame header in which jmspy broker names the refusing exception's code.
ERROR_CODE_HEADER: Final = "jmspy-error"

#: Any refusal without a more precise code.
BROKER_ERROR: Final = "BROKER_ERROR"
#: The destination does not exist and may not be auto-created (or was deleted).
DESTINATION_NOT_FOUND: Final = "DESTINATION_NOT_FOUND"
#: The destination name cannot be used this way (e.g. sending to a wildcard topic).
INVALID_DESTINATION: Final = "INVALID_DESTINATION"
#: The connection may not do this on this destination.
ACCESS_DENIED: Final = "ACCESS_DENIED"
#: The connection's credentials were refused.
AUTHENTICATION_FAILED: Final = "AUTHENTICATION_FAILED"
#: A configured limit (memory, disk, backlog, frame size...) refuses the operation.
RESOURCE_LIMIT_EXCEEDED: Final = "RESOURCE_LIMIT_EXCEEDED"
#: The call does not fit the current state (unknown delivery tag, closed consumer...).
ILLEGAL_STATE: Final = "ILLEGAL_STATE"
#: A topic subscription request breaks the JMS subscription rules.
INVALID_SUBSCRIPTION: Final = "INVALID_SUBSCRIPTION"
#: The client id is already used by another live connection.
INVALID_CLIENT_ID: Final = "INVALID_CLIENT_ID"
#: Unknown, duplicate or unusable transaction id.
TRANSACTION_ERROR: Final = "TRANSACTION_ERROR"
#: A message selector does not parse.
INVALID_SELECTOR: Final = "INVALID_SELECTOR"

#: Every code above: what a client may meet in :data:`ERROR_CODE_HEADER`.
CODES: Final = frozenset({
    BROKER_ERROR, DESTINATION_NOT_FOUND, INVALID_DESTINATION, ACCESS_DENIED,
    AUTHENTICATION_FAILED, RESOURCE_LIMIT_EXCEEDED, ILLEGAL_STATE, INVALID_SUBSCRIPTION,
    INVALID_CLIENT_ID, TRANSACTION_ERROR, INVALID_SELECTOR,
})
