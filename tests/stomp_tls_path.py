"""Which TLS a ``stomp+ssl://`` connection runs, checked the same way by every TLS test.

On a tested stomp.py jmspy runs TLS itself over stomp.py's TCP socket
(``transports/stomp/owned_tls.py``): the socket is jmspy's ``TlsStream`` after a finished
handshake, stomp.py stays blocking (no send queue) and jmspy's frame reader and writer
run. Otherwise (another stomp.py, ``JMSPY_LIBRARY_HOOKS=0``) stomp.py's ``set_ssl``
path: an ``ssl.SSLSocket`` read and written by stomp.py's I/O thread, the fast paths
stood aside. Either way the socket must be TLS: never a plain one.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

from jmspy.transports.stomp import stomppy_private
from jmspy.transports.stomp.owned_tls import TlsStream
from jmspy.transports.stomp.wire import FrameWriter

__all__ = ["assert_stomp_over_tls", "stomp_tls_socket"]


def stomp_tls_socket(transport: Any) -> Any:
    """The socket of a jmspy STOMP transport's stomp.py connection."""
    return transport._conn.transport.socket


def assert_stomp_over_tls(transport: Any) -> Any:
    """Assert the path this stomp.py takes (see above) and that the handshake finished;
    returns the socket."""
    stomp_transport = transport._conn.transport
    sock = stomp_transport.socket
    assert type(sock) is not socket.socket
    if stomppy_private.enabled():
        assert isinstance(sock, TlsStream), type(sock)
        assert stomp_transport.blocking is True and stomp_transport.send_queue is None
        assert transport._reader is not None  # jmspy's frame reader reads the stream
        writer = getattr(transport, "_writer", None)
        if isinstance(writer, FrameWriter):
            assert writer._send is not None  # the direct writer writes from the caller
    else:
        assert isinstance(sock, ssl.SSLSocket), type(sock)
        assert stomp_transport.blocking is False
        assert transport._reader is None  # stomp.py's I/O thread reads
    assert sock.version() is not None  # a finished TLS handshake
    return sock
