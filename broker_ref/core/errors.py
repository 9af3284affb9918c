"""Errors the broker core raises to its host.

A host maps each ``code`` to whatever its protocol carries (a JMS exception for ``vm://``,
an ERROR frame for STOMP). Each class is also the ``jmspy.JMSException`` subclass it means
to JMS (``DestinationNotFound`` is an ``InvalidDestinationException``), because the
broker's own API reaches users directly too -- ``vm.start_broker(...).stats("q")`` in an
application, a test or the README -- and ``except JMSException`` must catch everything
jmspy raises. Every message says what went wrong and what the client can do.
"""

from __future__ import annotations

from jmspy import errors as jms
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


class BrokerError(jms.JMSException):
    """Base of every refusal by the broker core.

    ``code`` is stable and short so hosts can translate errors without parsing text; the
    codes are :mod:`jmspy.wire.error_codes`, which the client maps by, and it is the JMS
    ``error_code`` too.
    """

    code: str = codes.BROKER_ERROR

    def __init__(self, message: str) -> None:
        jms.JMSException.__init__(self, message, error_code=self.code)
        self.message = message


class DestinationNotFound(BrokerError, jms.InvalidDestinationException):
    """The destination does not exist and may not be auto-created (or was deleted)."""

    code = codes.DESTINATION_NOT_FOUND


class InvalidDestination(BrokerError, jms.InvalidDestinationException):
    """The destination name cannot be used this way (e.g. sending to a wildcard topic)."""

    code = codes.INVALID_DESTINATION


class AccessDenied(BrokerError, jms.JMSSecurityException):
    """The connection may not do this on this destination (e.g. another's temp queue)."""

    code = codes.ACCESS_DENIED


class AuthenticationFailed(BrokerError, jms.JMSSecurityException):
    """The connection's credentials were refused (security on, see :mod:`.security`).

    One message for an unknown user and a wrong password, so a client cannot probe which
    user names exist; the password itself never appears in it.
    """

    code = codes.AUTHENTICATION_FAILED


class ResourceLimitExceeded(BrokerError, jms.ResourceAllocationException):
    """A configured limit (memory, backlog, consumers...) refuses the operation."""

    code = codes.RESOURCE_LIMIT_EXCEEDED


class IllegalBrokerState(BrokerError, jms.IllegalStateException):
    """The call does not fit the current state (unknown delivery tag, closed consumer...)."""

    code = codes.ILLEGAL_STATE


class InvalidSubscription(BrokerError, jms.InvalidDestinationException):
    """A topic subscription request breaks the JMS subscription rules."""

    code = codes.INVALID_SUBSCRIPTION


class InvalidClientId(BrokerError, jms.InvalidClientIDException):
    """The client id is already used by another live connection."""

    code = codes.INVALID_CLIENT_ID


class TransactionError(BrokerError, jms.IllegalStateException):
    """Unknown, duplicate or unusable transaction id."""

    code = codes.TRANSACTION_ERROR


class SelectorError(BrokerError, jms.InvalidSelectorException):
    """A message selector does not parse.

    Wraps ``jmspy.errors.InvalidSelectorException`` so hosts see one error family; the
    original is kept as ``__cause__`` and its position is copied for tools that underline.
    """

    code = codes.INVALID_SELECTOR

    def __init__(self, message: str, *, selector: str = "", position: int = -1) -> None:
        BrokerError.__init__(self, message)
        self.selector = selector
        self.position = position
