"""Which JMS exception a refusal of the in-process broker becomes: by the exception's class.

In process (``vm://``) the broker core's exception *class* picks the JMS class, its base
classes too, so a new subclass maps like its parent. Over the wire a class cannot travel
and the client maps the class's code instead (:mod:`.broker_errors`); the two tables must
agree, and every core class must be in this one (tests/test_broker_errors.py checks both).
Only ``vm://`` imports the broker, so this table lives beside it.
"""

from __future__ import annotations

from collections.abc import Mapping

from jmspy import errors
from jmspy.broker_ref.core import errors as core

__all__ = ["BY_CLASS", "translate"]

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
