"""jmspy: a JMS-style messaging SDK for Python.

>>> from jmspy import ConnectionFactory, Session
>>> with ConnectionFactory("vm://embedded").create_connection() as conn:
...     session = conn.create_session()
"""

from __future__ import annotations

# Before anything else: a source checkout's jmspy/ folder, imported by accident from the
# checkout's root, is refused with the reason and the fix (jmspy/_checkout.py).
from . import _checkout  # noqa: F401  (isort: skip)

# Next: it chooses the build (compiled or pure) of the modules imported below.
from . import _speedups  # noqa: F401  (isort: skip)
from .acknowledgement import AckMode
from .connection import Connection, ConnectionFactory, ExceptionListener
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
from .flow import FlowStats
from .message import BytesMessage, DeliveryMode, MapMessage, Message, TextMessage
from .producer import CompletionListener, MessageProducer
from .session import Session
from .tls_errors import TLSException

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
