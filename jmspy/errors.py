"""The JMS exception hierarchy.

Every error jmspy raises is a :class:`JMSException` subclass, so ``except JMSException``
catches all of them. The subclasses mirror the JMS specification's names because users
search for those names; each message says what went wrong *and* what to do about it.
"""

from __future__ import annotations

__all__ = [
    "IllegalStateException",
    "InvalidClientIDException",
    "InvalidConfigurationException",
    "InvalidDestinationException",
    "InvalidSelectorException",
    "JMSException",
    "JMSSecurityException",
    "MessageEOFException",
    "MessageFormatException",
    "MessageNotReadableException",
    "MessageNotWriteableException",
    "ResourceAllocationException",
    "TransactionInProgressException",
    "TransactionRolledBackException",
    "UnknownTransportException",
    "UnsupportedFeatureException",
]


class JMSException(Exception):
    """Base of every jmspy error.

    ``error_code`` is a short stable identifier (like the JMS ``errorCode``) that code can
    branch on without parsing the message text.
    """

    error_code: str = "JMS"
    #: Connection events (CONNECTION_INTERRUPTED, CONNECTION_RESUMED, CONNECTION_LOST):
    #: the URL of the broker concerned -- the one lost, or the one the connection is on
    #: now -- so a listener can tell which node of an address list it was. None otherwise.
    broker: str | None = None

    def __init__(self, message: str, *, error_code: str | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class IllegalStateException(JMSException):
    """An operation was called at a time or in a state that does not allow it."""

    error_code = "ILLEGAL_STATE"


class InvalidClientIDException(JMSException):
    """The client id is malformed or already in use by another connection."""

    error_code = "INVALID_CLIENT_ID"


class InvalidConfigurationException(JMSException):
    """A connection factory property, URL or broker setting is unknown or out of range."""

    error_code = "INVALID_CONFIGURATION"


class UnknownTransportException(InvalidConfigurationException):
    """The URL scheme names no registered transport."""

    error_code = "UNKNOWN_TRANSPORT"


class InvalidDestinationException(JMSException):
    """A destination name is invalid, or the destination does not exist any more."""

    error_code = "INVALID_DESTINATION"


class InvalidSelectorException(JMSException):
    """A message selector does not parse.

    ``position`` is the 0-based offset of the offending token in ``selector``, so tools can
    underline it; the message text already shows it with a caret.
    """

    error_code = "INVALID_SELECTOR"

    def __init__(self, message: str, *, selector: str = "", position: int = -1) -> None:
        super().__init__(message)
        self.selector = selector
        self.position = position


class JMSSecurityException(JMSException):
    """Authentication failed or the user may not do this on this destination."""

    error_code = "SECURITY"


class MessageFormatException(JMSException):
    """A property or body value has a type the message cannot hold or convert."""

    error_code = "MESSAGE_FORMAT"


class MessageEOFException(JMSException):
    """A BytesMessage was read past its end."""

    error_code = "MESSAGE_EOF"


class MessageNotReadableException(JMSException):
    """A message body was read while the message is write-only."""

    error_code = "MESSAGE_NOT_READABLE"


class MessageNotWriteableException(JMSException):
    """A received message was changed; call clear_body()/clear_properties() first."""

    error_code = "MESSAGE_NOT_WRITEABLE"


class ResourceAllocationException(JMSException):
    """The broker or client ran out of a resource (memory, store space, a limit)."""

    error_code = "RESOURCE_ALLOCATION"


class TransactionInProgressException(JMSException):
    """The operation is not allowed while a transaction is in progress."""

    error_code = "TRANSACTION_IN_PROGRESS"


class TransactionRolledBackException(JMSException):
    """A commit could not complete and the transaction was rolled back instead."""

    error_code = "TRANSACTION_ROLLED_BACK"


class UnsupportedFeatureException(JMSException):
    """The transport or broker in use cannot carry this feature.

    jmspy raises this rather than silently ignoring a feature a protocol lacks.
    """

    error_code = "UNSUPPORTED"
