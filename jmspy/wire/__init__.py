"""The vocabulary both ends of a jmspy connection share, and nothing else.

The bottom layer of the stack: the client (``jmspy``, its transports, ``jmspy.spark``)
and jmspy's broker (``jmspy.broker_ref``) both import these names from here, so that
neither has to import the other for a header name, an error code or an enumeration. A
``stomp://`` client therefore loads none of the broker (its store, its event loop) just
to know what the broker calls a refusal.

It imports the standard library and its own modules only (``tests/test_layers.py``
checks the sources and a fresh interpreter): a name that needs anything more belongs to
a layer above.
"""

from __future__ import annotations

from .error_codes import CODES, ERROR_CODE_HEADER
from .headers import DUPLICATE_ID, SEND_TIMEOUT_HEADER
from .kinds import BodyType, DestinationKind

__all__ = [
    "CODES",
    "DUPLICATE_ID",
    "ERROR_CODE_HEADER",
    "SEND_TIMEOUT_HEADER",
    "BodyType",
    "DestinationKind",
]
