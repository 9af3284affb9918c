"""Errors the broker core raises to its host.

They are deliberately *not* ``jmspy.JMSException`` subclasses: the core is a server, and a
host maps each ``code`` to whatever its protocol carries (a JMS exception for ``vm://``, an
ERROR frame for STOMP). Every message says what went wrong and what the client can do.
"""

from __future__ import annotations

from jmspy.wire import error_codes as codes

__all__ = [
    "AccessDenied",
    "AuthenticationFailed",
    "BrokerError",
    "DestinationNotFound",
    "IllegalBrokerState",
    "InvalidClientId",
    "InvalidDestination",
    "InvalidSubscription",
    "ResourceLimitExceeded",
    "SelectorError",
    "TransactionError",
]


class BrokerError(Exception):
    """Base of every refusal by the broker core.

    ``code`` is stable and short so hosts can translate errors without parsing text; the
    codes are :mod:`jmspy.wire.error_codes`, which the client maps by.
    """

    code: str = codes.BROKER_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DestinationNotFound(BrokerError):
    """The destination does not exist and may not be auto-created (or was deleted)."""

    code = codes.DESTINATION_NOT_FOUND


class InvalidDestination(BrokerError):
    """The destination name cannot be used this way (e.g. sending to a wildcard topic)."""

    code = codes.INVALID_DESTINATION


class AccessDenied(BrokerError):
    """The connection may not do this on this destination (e.g. another's temp queue)."""

    code = codes.ACCESS_DENIED


class AuthenticationFailed(BrokerError):
    """The connection's credentials were refused (security on, see :mod:`.security`).

    One message for an unknown user and a wrong password, so a client cannot probe which
    user names exist; the password itself never appears in it.
    """

    code = codes.AUTHENTICATION_FAILED


class ResourceLimitExceeded(BrokerError):
    """A configured limit (memory, backlog, consumers...) refuses the operation."""

    code = codes.RESOURCE_LIMIT_EXCEEDED


class IllegalBrokerState(BrokerError):
    """The call does not fit the current state (unknown delivery tag, closed consumer...)."""

    code = codes.ILLEGAL_STATE


class InvalidSubscription(BrokerError):
    """A topic subscription request breaks the JMS subscription rules."""

    code = codes.INVALID_SUBSCRIPTION


class InvalidClientId(BrokerError):
    """The client id is already used by another live connection."""

    code = codes.INVALID_CLIENT_ID


class TransactionError(BrokerError):
    """Unknown, duplicate or unusable transaction id."""

    code = codes.TRANSACTION_ERROR


class SelectorError(BrokerError):
    """A message selector does not parse.

    Wraps ``jmspy.errors.InvalidSelectorException`` so hosts see one error family; the
    original is kept as ``__cause__`` and its position is copied for tools that underline.
    """

    code = codes.INVALID_SELECTOR

    def __init__(self, message: str, *, selector: str = "", position: int = -1) -> None:
        super().__init__(message)
        self.selector = selector
        self.position = position
