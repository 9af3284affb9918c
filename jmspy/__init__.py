"""jmspy: a JMS-style messaging SDK for Python.

>>> from jmspy import ConnectionFactory, Session
>>> with ConnectionFactory("vm://embedded").create_connection() as conn:
...     session = conn.create_session()
"""

from __future__ import annotations

# Before anything else: a source checkout's jmspy/ folder, imported by accident from the
# checkout's root, is refused with the reason and the fix (jmspy/_checkout.py).
from . import _checkout  # noqa: F401  (isort: skip)

# Next: it chooses the build (compiled or pure) of every module imported later.
from . import _speedups  # noqa: F401  (isort: skip)

from typing import TYPE_CHECKING

from ._lazy import facade

# The public names are loaded when first used (PEP 562): ``import jmspy.wire`` or one
# transport's module then loads only what it needs, and no module inside the package
# depends on this one. Type checkers read the imports below.
if TYPE_CHECKING:
    from .acknowledgement import AckMode
    from .connection import Connection, ExceptionListener
    from .consumer import MessageConsumer, MessageListener, QueueBrowser
    from .context import JMSConsumer, JMSContext, JMSProducer
    from .destinations import Destination, Queue, TemporaryQueue, TemporaryTopic, Topic
    from .errors import (
        IllegalStateException,
        InvalidClientIDException,
        InvalidConfigurationException,
        InvalidDestinationException,
        InvalidSelectorException,
        JMSException,
        JMSSecurityException,
        MessageEOFException,
        MessageFormatException,
        MessageNotReadableException,
        MessageNotWriteableException,
        ResourceAllocationException,
        TransactionInProgressException,
        TransactionRolledBackException,
        UnknownTransportException,
        UnsupportedFeatureException,
    )
    from .factory import ConnectionFactory
    from .flow import FlowStats
    from .message import BytesMessage, DeliveryMode, MapMessage, Message, TextMessage
    from .producer import CompletionListener, MessageProducer
    from .session import Session
    from .tls_errors import TLSException

#: public name -> the module of the package that defines it
_PUBLIC: dict[str, str] = {
    "AckMode": "acknowledgement",
    "BytesMessage": "message",
    "CompletionListener": "producer",
    "Connection": "connection",
    "ConnectionFactory": "factory",
    "DeliveryMode": "message",
    "Destination": "destinations",
    "ExceptionListener": "connection",
    "FlowStats": "flow",
    "IllegalStateException": "errors",
    "InvalidClientIDException": "errors",
    "InvalidConfigurationException": "errors",
    "InvalidDestinationException": "errors",
    "InvalidSelectorException": "errors",
    "JMSConsumer": "context",
    "JMSContext": "context",
    "JMSException": "errors",
    "JMSProducer": "context",
    "JMSSecurityException": "errors",
    "MapMessage": "message",
    "Message": "message",
    "MessageConsumer": "consumer",
    "MessageEOFException": "errors",
    "MessageFormatException": "errors",
    "MessageListener": "consumer",
    "MessageNotReadableException": "errors",
    "MessageNotWriteableException": "errors",
    "MessageProducer": "producer",
    "Queue": "destinations",
    "QueueBrowser": "consumer",
    "ResourceAllocationException": "errors",
    "Session": "session",
    "TLSException": "tls_errors",
    "TemporaryQueue": "destinations",
    "TemporaryTopic": "destinations",
    "TextMessage": "message",
    "Topic": "destinations",
    "TransactionInProgressException": "errors",
    "TransactionRolledBackException": "errors",
    "UnknownTransportException": "errors",
    "UnsupportedFeatureException": "errors",
}

__version__ = "0.1.0"

__all__ = [
    "AckMode",
    "BytesMessage",
    "CompletionListener",
    "Connection",
    "ConnectionFactory",
    "DeliveryMode",
    "Destination",
    "ExceptionListener",
    "FlowStats",
    "IllegalStateException",
    "InvalidClientIDException",
    "InvalidConfigurationException",
    "InvalidDestinationException",
    "InvalidSelectorException",
    "JMSConsumer",
    "JMSContext",
    "JMSException",
    "JMSProducer",
    "JMSSecurityException",
    "MapMessage",
    "Message",
    "MessageConsumer",
    "MessageEOFException",
    "MessageFormatException",
    "MessageListener",
    "MessageNotReadableException",
    "MessageNotWriteableException",
    "MessageProducer",
    "Queue",
    "QueueBrowser",
    "ResourceAllocationException",
    "Session",
    "TLSException",
    "TemporaryQueue",
    "TemporaryTopic",
    "TextMessage",
    "Topic",
    "TransactionInProgressException",
    "TransactionRolledBackException",
    "UnknownTransportException",
    "UnsupportedFeatureException",
]


__getattr__, __dir__ = facade(__name__, globals(), _PUBLIC)
