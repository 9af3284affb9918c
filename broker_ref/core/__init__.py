"""The reference broker's core: in-memory, single-threaded, sans-I/O.

Hosts (the ``vm://`` transport, the STOMP server) create a :class:`Broker`, connect with a
:class:`SessionCallback` and drive everything through :class:`ServerConnection`. The core
is not thread-safe: hosts serialise calls (see :mod:`.api`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy._lazy import facade

# A façade (see jmspy._lazy): each public name's module is loaded when the name is first
# used, so a module of this package importing a sibling never runs the others.
if TYPE_CHECKING:
    from ..store.store import MemoryStore, RecoveredState, Store, StoredMessage, SubscriptionRecord
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

_PUBLIC: dict[str, str] = {
    "AccessDenied": "errors",
    "AddressSettings": "api",
    "BodyType": "api",
    "Broker": "broker",
    "BrokerError": "errors",
    "ConsumerInfo": "api",
    "CoreConnection": "api",
    "DEAD_LETTER_REASON": "api",
    "Delivery": "api",
    "DestinationKind": "api",
    "DestinationNotFound": "errors",
    "DestinationStats": "api",
    "IllegalBrokerState": "errors",
    "InvalidClientId": "errors",
    "InvalidDestination": "errors",
    "InvalidSubscription": "errors",
    "MemoryStore": "..store.store",
    "ORIGINAL_DESTINATION": "api",
    "RecoveredState": "..store.store",
    "ResourceLimitExceeded": "errors",
    "SelectorError": "errors",
    "ServerConnection": "connection",
    "ServerMessage": "api",
    "SessionCallback": "api",
    "SettingsRegistry": "settings",
    "Store": "..store.store",
    "StoredMessage": "..store.store",
    "SubscriptionRecord": "..store.store",
    "TEMP_PREFIX": "api",
    "TransactionError": "errors",
    "pattern_matches": "settings",
}

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


__getattr__, __dir__ = facade(__name__, globals(), _PUBLIC)
