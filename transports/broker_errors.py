"""Which JMS exception a refusal of jmspy's broker becomes over the wire: one table, by code.

Over STOMP an exception class cannot travel, so jmspy broker names the refusing class's
stable code (:mod:`jmspy.wire.error_codes`) in an ERROR frame's ``jmspy-error`` header
(:data:`ERROR_CODE_HEADER`) and the client maps that code through :data:`BY_CODE`; only
foreign brokers, which send no such header, are classified by their ERROR text. The
codes come from the shared vocabulary, not from the broker, so a ``stomp://`` client
loads none of the broker. In process (``vm://``) the core's exception class itself picks
the JMS class: :mod:`.vm_errors`, whose table must agree with this one (the tests check).
"""

from __future__ import annotations

from collections.abc import Mapping

from jmspy import errors
from jmspy.wire import error_codes as codes
from jmspy.wire.error_codes import ERROR_CODE_HEADER

__all__ = ["BY_CODE", "ERROR_CODE_HEADER", "class_for_code", "for_user"]

#: The broker's stable refusal codes (what crosses the wire) -> JMS exception classes.
BY_CODE: Mapping[str, type[errors.JMSException]] = {
    codes.DESTINATION_NOT_FOUND: errors.InvalidDestinationException,
    codes.INVALID_DESTINATION: errors.InvalidDestinationException,
    codes.ACCESS_DENIED: errors.JMSSecurityException,
    codes.AUTHENTICATION_FAILED: errors.JMSSecurityException,
    codes.RESOURCE_LIMIT_EXCEEDED: errors.ResourceAllocationException,
    codes.ILLEGAL_STATE: errors.IllegalStateException,
    codes.INVALID_SUBSCRIPTION: errors.InvalidDestinationException,
    codes.TRANSACTION_ERROR: errors.IllegalStateException,
    codes.INVALID_SELECTOR: errors.InvalidSelectorException,
    codes.INVALID_CLIENT_ID: errors.InvalidClientIDException,
    codes.BROKER_ERROR: errors.JMSException,
}


def class_for_code(code: str | None) -> type[errors.JMSException] | None:
    """The JMS class for a ``jmspy-error`` code, or None (no header, or an unknown code)."""
    return None if code is None else BY_CODE.get(code)


def for_user(user: str | None, text: str = "") -> str:
    """Whose login a refusal names (`` for user 'x'``, or that none was given), unless the
    broker's ``text`` names the user already: each thing said once."""
    if not user:
        return " (no user name given)"
    return "" if repr(user) in text else f" for user {user!r}"
