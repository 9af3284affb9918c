"""Which JMS exception a refusal of jmspy's broker becomes: one table, by class.

In process (``vm://``) the broker core's exception *class* picks the JMS class (its base
classes too, so a new subclass maps like its parent). Over STOMP a class cannot travel, so
jmspy broker names it in an ERROR frame's ``jmspy-error`` header with the class's stable
``code`` (:data:`ERROR_CODE_HEADER`) and the client maps that code through the same table;
only foreign brokers, which send no such header, are classified by their ERROR text.
"""

from __future__ import annotations

from collections.abc import Mapping

from jmspy import errors
from jmspy.broker_ref.core import errors as core

__all__ = ["BY_CLASS", "BY_CODE", "ERROR_CODE_HEADER", "class_for_code", "for_user",
           "translate"]

#: The ERROR frame header in which jmspy broker names the refusing exception's code.
ERROR_CODE_HEADER = "jmspy-error"

BY_CLASS: Mapping[type[core.BrokerError], type[errors.JMSException]] = {
    core.DestinationNotFound: errors.InvalidDestinationException,
    core.InvalidDestination: errors.InvalidDestinationException,
    core.AccessDenied: errors.JMSSecurityException,
    core.AuthenticationFailed: errors.JMSSecurityException,
    core.ResourceLimitExceeded: errors.ResourceAllocationException,
    core.IllegalBrokerState: errors.IllegalStateException,
    core.InvalidSubscription: errors.InvalidDestinationException,
    core.TransactionError: errors.IllegalStateException,
    core.SelectorError: errors.InvalidSelectorException,
    core.InvalidClientId: errors.InvalidClientIDException,
    core.BrokerError: errors.JMSException,
}

#: The same table by the classes' stable codes (what crosses the wire).
BY_CODE: Mapping[str, type[errors.JMSException]] = {
    cls.code: jms for cls, jms in BY_CLASS.items()
}


def translate(exc: Exception) -> errors.JMSException:
    """The JMS exception for an exception the broker core raised (by its class). A core
    error is a JMS exception already, but a client of ``vm://`` gets the plain JMS class
    (as a client of ``stomp://`` does), not the broker's own."""
    if isinstance(exc, errors.JMSException) and not isinstance(exc, core.BrokerError):
        return exc
    for klass in type(exc).__mro__:
        mapped = BY_CLASS.get(klass)
        if mapped is not None:
            return mapped(str(exc))
    return errors.JMSException(f"broker error: {exc}")


def class_for_code(code: str | None) -> type[errors.JMSException] | None:
    """The JMS class for a ``jmspy-error`` code, or None (no header, or an unknown code)."""
    return None if code is None else BY_CODE.get(code)


def for_user(user: str | None, text: str = "") -> str:
    """Whose login a refusal names (`` for user 'x'``, or that none was given), unless the
    broker's ``text`` names the user already: each thing said once."""
    if not user:
        return " (no user name given)"
    return "" if repr(user) in text else f" for user {user!r}"
