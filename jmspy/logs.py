"""jmspy's loggers: one hierarchy under three roots, and the libraries' chatter kept down.

* ``jmspy.client.*``: the API side (``jmspy.client.connection``: connect, reconnect,
  close; ``jmspy.client.flow``: the consumer flow window's decisions; ``jmspy.client.pool``:
  the worker pool). No logger says anything per message: at DEBUG a connection logs its
  connect, subscriptions, flow decisions and reconnects, whatever the traffic.
* ``jmspy.transport.*``: one per transport (``jmspy.transport.stomp``,
  ``jmspy.transport.mqtt``, ``jmspy.transport.vm``): what goes over the wire apart from
  messages (CONNECT, SUBSCRIBE, credit, ERROR frames, drops).
* ``jmspy.broker.*``: the bundled broker (``jmspy.broker.stomp``, ``.config``,
  ``.security``, ``.flow``, ``.store``).

stomp.py logs every frame at DEBUG and its own copy of a failed write ("error sending
frame" with a traceback) at ERROR; jmspy raises that failure itself, naming what the broker
said. So when a transport first loads its library, :func:`quiet_library_loggers` sets the
library's logger to WARNING -- only if the application has not set a level on it -- and
drops stomp.py's "error sending frame" and "could not connect to host" records (jmspy
raises both failures itself) unless that logger is at DEBUG. An
application that wants the chatter sets the level itself, before or after connecting:
``logging.getLogger("stomp.py").setLevel(logging.DEBUG)``.
"""

from __future__ import annotations

import logging
import threading

__all__ = [
    "BROKER",
    "CLIENT",
    "LIBRARY_LOGGERS",
    "ROOTS",
    "TRANSPORT",
    "broker_logger",
    "client_logger",
    "quiet_library_loggers",
    "transport_logger",
]

CLIENT = "jmspy.client"
BROKER = "jmspy.broker"
TRANSPORT = "jmspy.transport"
#: Every jmspy logger is one of these or below one of them.
ROOTS = (CLIENT, BROKER, TRANSPORT)
#: The loggers of the libraries the transports drive (paho logs only to a logger it is
#: given, and jmspy gives it none: its failures reach the application as exceptions).
LIBRARY_LOGGERS = ("stomp.py",)

_quieted = False
_lock = threading.Lock()


def client_logger(name: str) -> logging.Logger:
    """``jmspy.client.NAME``."""
    return logging.getLogger(f"{CLIENT}.{name}")


def transport_logger(name: str) -> logging.Logger:
    """``jmspy.transport.NAME``."""
    return logging.getLogger(f"{TRANSPORT}.{name}")


def broker_logger(name: str) -> logging.Logger:
    """``jmspy.broker.NAME``."""
    return logging.getLogger(f"{BROKER}.{name}")


class _DropRaisedWriteErrors(logging.Filter):
    """stomp.py's "error sending frame" (a traceback at ERROR): jmspy raises the same
    failure from the call that wrote, with the broker's reason, so the record is dropped
    unless the application asked for stomp.py's DEBUG lines."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self._logger = logger

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in _RAISED or self._logger.isEnabledFor(logging.DEBUG)


#: stomp.py's records of failures jmspy raises itself: a failed write, and a failed
#: connect (a TLS handshake's included, which jmspy explains: jmspy/tls_errors.py).
_RAISED = ("error sending frame", "could not connect to host %s, port %s: %s")


def quiet_library_loggers() -> None:
    """Once per process: each library logger without a level of the application's gets
    WARNING; stomp.py's raised write errors are not logged twice (see the module)."""
    global _quieted
    with _lock:
        if _quieted:
            return
        _quieted = True
        for name in LIBRARY_LOGGERS:
            logger = logging.getLogger(name)
            if logger.level == logging.NOTSET:
                logger.setLevel(logging.WARNING)
            logger.addFilter(_DropRaisedWriteErrors(logger))
