"""The reference broker's core: in-memory, single-threaded, sans-I/O.

Hosts (the ``vm://`` transport, the STOMP server) create a :class:`Broker`, connect with a
:class:`SessionCallback` and drive everything through :class:`ServerConnection`. The core
is not thread-safe: hosts serialise calls (see :mod:`.api`).
"""

from .api import (
    DEAD_LETTER_REASON,
    ORIGINAL_DESTINATION,
    TEMP_PREFIX,
    AddressSettings,
    BodyType,
    ConsumerInfo,
    CoreConnection,
    Delivery,
    DestinationKind,
    DestinationStats,
    ServerMessage,
    SessionCallback,
)
from .broker import Broker
from .connection import ServerConnection
from .errors import (
    AccessDenied,
    BrokerError,
    DestinationNotFound,
    IllegalBrokerState,
    InvalidClientId,
    InvalidDestination,
    InvalidSubscription,
    ResourceLimitExceeded,
    SelectorError,
    TransactionError,
)
from .settings import SettingsRegistry, pattern_matches
from .store import MemoryStore, RecoveredState, Store, StoredMessage, SubscriptionRecord

__all__ = [
    "DEAD_LETTER_REASON",
    "ORIGINAL_DESTINATION",
    "TEMP_PREFIX",
    "AccessDenied",
    "AddressSettings",
    "BodyType",
    "Broker",
    "BrokerError",
    "ConsumerInfo",
    "CoreConnection",
    "Delivery",
    "DestinationKind",
    "DestinationNotFound",
    "DestinationStats",
    "IllegalBrokerState",
    "InvalidClientId",
    "InvalidDestination",
    "InvalidSubscription",
    "MemoryStore",
    "RecoveredState",
    "ResourceLimitExceeded",
    "SelectorError",
    "ServerConnection",
    "ServerMessage",
    "SessionCallback",
    "SettingsRegistry",
    "Store",
    "StoredMessage",
    "SubscriptionRecord",
    "TransactionError",
    "pattern_matches",
]
