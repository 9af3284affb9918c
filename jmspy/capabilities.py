"""The vocabulary of the capability matrix: features, how a target carries them, refusals.

A JMS feature reaches a broker in one of three ways, and users deserve to know which
before they depend on it:

* **native**: the protocol and broker carry it (a header, a frame, a packet option);
* **emulated**: the client does it on top of what the protocol offers, with the limits
  the matrix states (a client-side selector, a stash enforcing a window);
* **refused**: jmspy raises :class:`RefusedFeatureException` instead of pretending.

The matrix itself (which transport and broker does what) lives in
``jmspy.transports.capabilities``; this module only holds the types, so the core can
name features without importing any transport.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .errors import UnsupportedFeatureException

__all__ = ["Cell", "Feature", "RefusedFeatureException", "Support", "emulated", "native",
           "refused"]


class Support(enum.Enum):
    NATIVE = "native"
    EMULATED = "emulated"
    REFUSED = "refused"


class Feature(enum.Enum):
    """One row of the matrix; the value is the row's title in the docs."""

    CONSUMER_WINDOW = "consumer window + threshold"
    CONNECTION_FLOW_LIMIT = "connection flow limit"
    QUEUES = "queues (competing consumers)"
    TOPIC_SELECTORS = "selectors on topics"
    QUEUE_SELECTORS = "selectors on queues"
    TRANSACTIONS = "transactions"
    REDELIVERY = "recover / rollback redelivery"
    DELIVERY_COUNT = "JMSXDeliveryCount"
    BROWSER = "queue browser"
    DELIVERY_DELAY = "delivery delay"
    PRIORITY = "priority"
    TIME_TO_LIVE = "time to live"
    HEADERS = "JMS headers, properties, body kind"
    DURABLE_SUBSCRIPTIONS = "durable subscriptions"
    UNSUBSCRIBE = "unsubscribe(name)"
    SHARED_SUBSCRIPTIONS = "shared subscriptions"
    NO_LOCAL = "no_local consumers"
    OVERLAPPING_SUBSCRIPTIONS = "overlapping subscriptions on one connection"
    WILDCARD_SUBSCRIPTIONS = "wildcard topics (`*` one word, `#` or `>` the rest)"
    TEMPORARY_QUEUES = "temporary queues"
    DESTINATION_STATS = "destination stats"
    DESTINATION_OPTIONS = "destination options (`orders?x-queue-type=quorum`)"
    READING_LEASES = "reading leases (lend, then settle from any connection)"


@dataclass(frozen=True, slots=True)
class Cell:
    """How one target carries one feature.

    ``how``: the short explanation the docs show (the header used, or why it is refused).
    ``instead``: for a refusal, what the application can do instead (the error says it).
    ``blocked_by``: a refusal that follows from another refused feature (MQTT 3.1.1 has no
    queues, so it has no queue selectors either): the error raised names that feature.
    """

    support: Support
    how: str
    instead: str = ""
    blocked_by: Feature | None = None

    def text(self) -> str:
        """The cell as the docs print it."""
        return f"{self.support.value}: {self.how}" if self.how else self.support.value


def native(how: str = "") -> Cell:
    return Cell(Support.NATIVE, how)


def emulated(how: str) -> Cell:
    return Cell(Support.EMULATED, how)


def refused(how: str, instead: str, blocked_by: Feature | None = None) -> Cell:
    if not instead:
        raise ValueError("a refusal must say what to do instead")
    return Cell(Support.REFUSED, how, instead, blocked_by)


class RefusedFeatureException(UnsupportedFeatureException):
    """A feature the capability matrix marks *refused* for this transport and broker.

    ``feature``, ``transport`` (the URL scheme) and ``target`` (the matrix column) let
    code react without parsing the message; the message names the transport, the broker
    and what to do instead.
    """

    def __init__(self, message: str, *, feature: Feature, transport: str, target: str) -> None:
        super().__init__(message)
        self.feature = feature
        self.transport = transport
        self.target = target
