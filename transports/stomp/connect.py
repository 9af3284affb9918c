"""Opening one stomp.py connection for ``stomp://``: the URL's options, the CONNECT with a
deadline, and what a refusal means.

stomp.py's own wait for CONNECTED (``wait=True``) has no deadline, so a server that
accepts TCP and never answers held ``create_connection()`` forever; here the wait is
``connect_timeout``. The bytes stomp.py reads become frames in jmspy's codec
(:mod:`.receive`), which bounds a body by ``max_frame_bytes``. Nagle's algorithm is turned
off: ACK and SEND frames are small, and an ACK written while an earlier frame was
unacknowledged waited for the broker's delayed TCP ACK (~40 ms on Linux), so every
flow-control batch stalled (measured: 134 msgs/s at limit 5 instead of thousands).
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import SplitResult, parse_qsl

from jmspy import errors
from jmspy.idle_spin import DEFAULT_IDLE_SPIN_US
from jmspy.logs import quiet_library_loggers, transport_logger
from jmspy.tls import TlsSettings
from jmspy.tls_errors import TLSException, diagnose
from jmspy.transport import Credentials
from jmspy.wire.error_text import error_text

from ..broker_errors import ERROR_CODE_HEADER, class_for_code, for_user
from ..library_hooks import installed_version
from . import stomppy_private
from .owned_tls import handshake
from .receipts import Receipts
from .receive import FrameReader, install
from .url_options import STOMP_URL_OPTIONS, URL_OPTIONS
from .wire import use_c_write_lock

try:
    import stomp as _stomp
except ImportError:  # pragma: no cover - exercised by the packaging test
    _stomp = None

__all__ = ["ConnectOptions", "Receiver", "ReceiverEvents", "drop", "open_stomp", "shut_down"]

log = transport_logger("stomp")


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    """What a ``stomp://`` URL and the factory properties say about connecting."""

    host: str
    port: int
    version: str  # "1.2" (tries 1.2, then 1.1) or "1.1"
    heartbeat: int  # ms, both directions
    vhost: str
    connect_timeout: float
    max_frame_bytes: int
    dialect: str | None
    queue_selectors_discard: bool
    #: imqConnectionFlowLimit asked of the broker on CONNECT (0: not enabled); jmspy
    #: broker enforces it, other brokers ignore the header and the client stash does
    connection_flow_limit: int
    #: microseconds a session thread reading the socket polls it before it sleeps
    #: (``idle_spin_us``; 0: off; jmspy/idle_spin.py says when it pays)
    idle_spin_us: int = DEFAULT_IDLE_SPIN_US
    #: the TLS options of this address (stomp+ssl://, stomps://); None: plain text
    tls: TlsSettings | None = None

    @classmethod
    def parse(cls, url: SplitResult, properties: Mapping[str, Any]) -> ConnectOptions:
        if _stomp is None:
            raise errors.InvalidConfigurationException(
                "the stomp:// transport needs the stomp.py package: pip install 'jmspy[stomp]'"
            )
        table = URL_OPTIONS.get(url.scheme.lower(), STOMP_URL_OPTIONS)
        query = table.parse(url)
        tls = _stomp_tls(url, dict(parse_qsl(url.query)), properties)
        return cls(
            host=url.hostname or "127.0.0.1",
            port=url.port or (61613 if tls is None else 61614),
            version=query["version"],
            heartbeat=query["heartbeat"],
            vhost=query["vhost"],
            connect_timeout=query["connect_timeout"],
            max_frame_bytes=query["max_frame_bytes"],
            dialect=query["dialect"],
            queue_selectors_discard=query["rabbitmq_queue_selectors"] == "discard",
            connection_flow_limit=(int(properties.get("imqConnectionFlowLimit", 0))
                                   if properties.get("imqConnectionFlowLimitEnabled") else 0),
            idle_spin_us=query["idle_spin_us"],
            tls=tls,
        )

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"


def _stomp_tls(url: SplitResult, query: dict[str, str],
               properties: Mapping[str, Any]) -> TlsSettings | None:
    """The address's TLS settings. jmspy runs TLS itself on a tested stomp.py
    (:mod:`.owned_tls`), with the context the settings make or the application's own.
    On the public path stomp.py's ``set_ssl`` builds its own context from file names (a
    CA *file*, the client certificate, key and password, verify on or off), so a ready
    ``sslContext`` or a CA directory would be dropped: refused there, rather than
    connecting with other checks than asked for."""
    tls = TlsSettings.resolve(url.scheme, query, properties)
    if tls is None or stomppy_private.enabled():
        return tls
    if tls.ssl_context is not None:
        raise errors.InvalidConfigurationException(
            f"{url.scheme}:// cannot use sslContext with this stomp.py ({_stomp_version()}) "
            "or with JMSPY_LIBRARY_HOOKS=0: stomp.py then builds its own TLS context and "
            "takes no ready one; give the files instead (sslCAFile, sslCertFile, "
            "sslKeyFile, sslKeyPassword), which it loads at every connect, install "
            f"stomp.py {' or '.join(stomppy_private.TESTED)}.x, or use mqtts://")
    if tls.ca_path is not None:
        raise errors.InvalidConfigurationException(
            f"{url.scheme}:// cannot use sslCAPath={tls.ca_path!r} with this stomp.py "
            f"({_stomp_version()}) or with JMSPY_LIBRARY_HOOKS=0: stomp.py then loads CAs "
            "from one file only; concatenate the CA certificates into one PEM file and "
            f"give it as sslCAFile, or install stomp.py {' or '.join(stomppy_private.TESTED)}.x")
    return tls


def _stomp_version() -> str:
    return f"stomp.py {installed_version('stomp.py') or 'not installed'}"


def _own_tls(conn: Any, options: ConnectOptions) -> bool:
    """jmspy's own TLS over the socket stomp.py connects (:mod:`.owned_tls`): a context
    made now from the settings (files read again at every connect) or the application's,
    the handshake checking ``options.host`` (and sending it as SNI). False off a tested
    stomp.py: the caller uses stomp.py's ``set_ssl``."""
    tls = options.tls
    assert tls is not None
    transport = getattr(conn, "transport", None)
    if transport is None or not stomppy_private.enabled():
        return False
    context = tls.context(options.where)  # every file loaded now, failing clearly
    return stomppy_private.own_tls(transport, lambda raw: handshake(
        raw, context, options.host, options.connect_timeout))


def _set_ssl(conn: Any, options: ConnectOptions) -> None:
    """stomp.py's TLS for this connection, from the address's settings. The context made
    here first loads every file the way stomp.py's will (and fails with what to fix,
    where OpenSSL would ask for an encrypted key's password on the terminal), so a
    renewed certificate is what this connect loads."""
    tls = options.tls
    assert tls is not None
    if tls.ssl_context is not None or tls.ca_path is not None:  # refused at parse time
        raise errors.InvalidConfigurationException(
            f"stomp.py's own TLS cannot take sslContext or sslCAPath ({options.where})")
    tls.context(options.where)  # loads every file as stomp.py will, failing clearly
    conn.set_ssl(for_hosts=[(options.host, options.port)], key_file=tls.key_file,
                 cert_file=tls.cert_file, ca_certs=tls.ca_file, password=tls.key_password,
                 verify=tls.verify)


def _tls_failure(options: ConnectOptions) -> TLSException | None:
    """Why a connect that failed without the broker's word failed, if TLS is why: a
    handshake the address's TLS settings cannot complete, or a plain-text address that
    is a TLS listener (:func:`jmspy.tls_errors.diagnose`)."""
    tls = options.tls
    context = None if tls is None else tls.context(options.where, warn=False)
    return diagnose(options.host, options.port, context, timeout=options.connect_timeout,
                    family="stomp")


class ReceiverEvents(Protocol):
    """What the transport does with the frames stomp.py hands its listener."""

    def on_connected_frame(self, headers: dict[str, str]) -> None: ...

    def on_error_frame(self, headers: dict[str, str], body: Any) -> None: ...

    def on_message_frame(self, headers: dict[str, str], body: bytes) -> None: ...

    def on_stream_error(self, text: str) -> None:
        """The broker's bytes stopped being STOMP jmspy accepts (the connection is closing)."""

    def on_receipt(self, receipt_id: str, headers: dict[str, str]) -> None: ...

    def on_disconnected(self, conn: Any) -> None:
        """The socket of ``conn`` closed (it may be a connection already replaced)."""


#: The frame types stomp.py hands its listeners; it logs and drops any other.
_STOMP_PY_FRAMES = frozenset({"connected", "message", "receipt", "error", "heartbeat"})


class Receiver:
    """stomp.py's listener: runs on its receiver thread, only converts and buffers.
    (MESSAGE frames come here only where jmspy's frame reader could not be installed.)

    Where they do, stomp.py parsed them, and this refuses what jmspy's reader refuses
    (:mod:`.receive`): a body over ``max_frame_bytes``, a header stomp.py could only decode
    by putting U+FFFD for bytes that are not UTF-8, and (:meth:`check_frames`) a frame
    whose command is not STOMP, which stomp.py would log and skip. The stream is not to be
    trusted past such a frame: the handler is told, the socket is shut down, and the drop
    reaches :meth:`on_disconnected` like any other (a blocked receive() then raises
    CONNECTION_LOST; with reconnect on, failover opens a new connection)."""

    def __init__(self, events: ReceiverEvents, max_frame_bytes: int = 0) -> None:
        self.events = events
        self.max_frame_bytes = max_frame_bytes
        self.broken = False  # a frame was refused: nothing after it is passed on
        self.conn: Any = None  # the stomp.py connection this receiver belongs to
        #: set once the broker answered CONNECT (CONNECTED or ERROR) or the socket closed:
        #: what the connecting thread waits for, at most connect_timeout
        self.answered = threading.Event()

    def on_connected(self, frame: Any) -> None:
        self.events.on_connected_frame(dict(frame.headers))
        self.answered.set()

    def on_error(self, frame: Any) -> None:
        self.events.on_error_frame(dict(frame.headers), frame.body)
        self.answered.set()

    def on_message(self, frame: Any) -> None:
        if self.broken:
            return
        body = frame.body
        limit = self.max_frame_bytes
        if limit and len(body) > limit:
            self._refuse(f"a MESSAGE body of {len(body)} bytes is over max_frame_bytes="
                         f"{limit}; raise max_frame_bytes in the URL to accept it")
            return
        headers = dict(frame.headers)
        if any("\ufffd" in k or "\ufffd" in v for k, v in headers.items()):
            self._refuse("a MESSAGE header is not valid UTF-8")
            return
        self.events.on_message_frame(headers, body)

    def check_frames(self, conn: Any) -> None:
        """Refuse frames whose command is not STOMP (stomp.py logs and skips them), through
        the transport's public ``process_frame``, which each parsed frame goes through."""
        transport = conn.transport
        process = transport.process_frame

        def checked(frame: Any, frame_str: Any) -> None:
            if self.broken:
                return
            if str(frame.cmd).lower() not in _STOMP_PY_FRAMES:
                self._refuse(f"a frame with the command {str(frame.cmd)[:40]!r}")
                return
            process(frame, frame_str)

        transport.process_frame = checked

    def _refuse(self, what: str) -> None:
        self.broken = True
        self.events.on_stream_error(
            f"the broker sent bytes that are not a valid STOMP frame ({what}); the "
            "connection is closed and, with reconnect enabled, opened again")
        if self.conn is not None:
            shut_down(self.conn)

    def on_receipt(self, frame: Any) -> None:
        headers = dict(frame.headers)
        self.events.on_receipt(headers.get("receipt-id", ""), headers)

    def on_disconnected(self) -> None:
        self.answered.set()
        if self.conn is not None:
            self.events.on_disconnected(self.conn)

    def on_heartbeat_timeout(self) -> None:
        """stomp.py's heart-beat thread calls every listener's after closing a socket whose
        broker went silent; the close itself reaches :meth:`on_disconnected`."""


#: How long :func:`drop` waits for stomp.py's I/O thread to close a socket it shut down.
IO_THREAD_WAIT = 1.0


def drop(conn: Any) -> None:
    """Close a stomp.py connection's socket now, without DISCONNECT (the broker did not
    answer, or already answered it).

    The socket is shut down first, so stomp.py's I/O thread reads the end of the stream and
    closes the socket itself; this waits up to :data:`IO_THREAD_WAIT` s for that thread before
    stomp.py's ``disconnect_socket`` does its bookkeeping. Called straight away, that method
    raced the I/O thread to the socket (after a DISCONNECT receipt the broker closes its end
    too) and logged "unable to issue SHUT_RDWR ... Bad file descriptor" on a clean close."""
    transport = getattr(conn, "transport", None)
    if transport is None:
        return
    transport.running = False
    sock = getattr(transport, "socket", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # not connected any more, or the I/O thread has closed it already
    io_thread = getattr(transport, "io_thread", None)
    if (isinstance(io_thread, threading.Thread) and io_thread.is_alive()
            and io_thread is not threading.current_thread()):
        io_thread.join(IO_THREAD_WAIT)
    try:
        transport.disconnect_socket()
    except Exception:
        pass


def shut_down(conn: Any) -> None:
    """Shut a stomp.py connection's socket down and nothing more: its reading thread then
    reads the end of the stream and reports the drop the one way every drop is reported
    (``Receiver.on_disconnected``). For a write that failed: the socket is broken, whether
    or not the reader has noticed yet.

    Over TLS that thread never takes an empty read for the end: stomp.py 9 reads TLS
    sockets non-blocking and calls an empty read "no data yet" (its comment: recv() for
    TLS sockets can return None while the connection is still open), so a closed socket
    would be polled forever. There the loop is also told to stop (``running``, as
    :func:`drop` does), and it reports the drop as it ends."""
    transport: Any = getattr(conn, "transport", None)
    sock = getattr(transport, "socket", None)
    if sock is not None:
        if isinstance(sock, ssl.SSLSocket):
            transport.running = False
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # not connected any more: the reader has seen the end already


def _end_at_tls_eof(conn: Any) -> None:
    """Make stomp.py's I/O loop end (and report the drop) when a TLS peer closes.

    stomp.py 9 reads TLS sockets non-blocking and takes an empty read for "no data yet"
    (see :func:`shut_down`), so a broker that closed its end -- stopped, restarted, or
    crashed -- was polled for ever (a spinning thread) and the connection never heard of
    the drop: no CONNECTION_INTERRUPTED, no reconnect. A non-blocking ``SSLSocket`` says
    "no data yet" by raising ``SSLWantReadError``; an empty read (b"", where stomp.py's
    own None means "not connected yet"), or any other socket error it lets through, is
    the end of the stream. There the loop is told to stop, and it reports the
    drop as it ends, as it does on a plain socket."""
    transport: Any = getattr(conn, "transport", None)
    receive = getattr(transport, "receive", None)
    if transport is None or not callable(receive):
        return

    def receive_until_eof() -> Any:
        try:
            data = receive()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except OSError:
            transport.running = False
            raise
        if data == b"":  # None: stomp.py's "not connected yet", swallowing an error
            transport.running = False
        return data

    transport.receive = receive_until_eof


def _no_delay(conn: Any) -> None:
    """Turn off Nagle's algorithm on stomp.py's socket (it leaves it on; see above)."""
    sock = getattr(getattr(conn, "transport", None), "socket", None)
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # not a TCP socket (or already closed): nothing to tune


_SECURITY_WORDS = ("auth", "login", "password", "access refused", "credentials",
                   "not authorized", "security")


def open_stomp(
    options: ConnectOptions, version: str, credentials: Credentials, events: ReceiverEvents,
    receipts: Receipts, make_reader: Callable[[Any], FrameReader],
) -> tuple[Any, FrameReader | None] | None:
    """CONNECT speaking ``version``: (the stomp.py connection, its frame reader if one
    could be installed), or None
    when the broker does not speak 1.2 (the caller tries 1.1). Raises the JMSException
    that says why otherwise: no answer in time, login refused, connection refused."""
    assert _stomp is not None
    quiet_library_loggers()
    klass = _stomp.Connection12 if version == "1.2" else _stomp.Connection11
    where = options.where
    conn = klass(
        [(options.host, options.port)],
        heartbeats=(options.heartbeat, options.heartbeat),
        vhost=options.vhost,
        auto_decode=False,
        reconnect_attempts_max=1,
        timeout=options.connect_timeout,
    )
    receiver = Receiver(events, options.max_frame_bytes)
    receiver.conn = conn
    conn.set_listener("jmspy", receiver)
    if options.tls is not None and _own_tls(conn, options):
        # jmspy's TLS under stomp.py: a blocking socket that can be written by one
        # thread while another reads it, so the fast paths work as on plain text
        reader = install(conn, make_reader)
    elif options.tls is not None:
        # stomp.py's TLS socket is non-blocking behind its own send queue: jmspy's
        # reading of the raw socket steps aside (FrameWriter does too, seeing the same).
        # On purpose: poll() cannot see plaintext OpenSSL already decrypted, and one
        # TLS connection must not be written by one thread while another reads it;
        # stomp.py's I/O thread does both (tests/interop/test_tls_streams.py)
        _set_ssl(conn, options)
        _end_at_tls_eof(conn)
        reader = None
    else:
        reader = install(conn, make_reader)
    if reader is None:  # stomp.py parses the frames: refuse what jmspy's reader would
        receiver.check_frames(conn)
    use_c_write_lock(conn)
    headers = {"client-id": credentials.client_id} if credentials.client_id else {}
    if options.connection_flow_limit:
        headers["jmspy-connection-flow-limit"] = str(options.connection_flow_limit)
    receipts.last_error = receipts.connection_error = None
    try:
        conn.connect(credentials.user, credentials.password, wait=False, headers=headers)
        if not receiver.answered.wait(options.connect_timeout):
            drop(conn)
            # a TLS address: was it the handshake? (A plain one: a TLS listener would have
            # refused the plain bytes at once instead of going silent.)
            tls_failure = None if options.tls is None else _tls_failure(options)
            if tls_failure is not None:
                raise tls_failure
            raise errors.JMSException(
                f"no answer to CONNECT from {where} within connect_timeout="
                f"{options.connect_timeout:g} s: the server accepted the TCP connection but "
                "sent no CONNECTED frame; check that this host:port is a STOMP listener "
                "(not another protocol's port) and that the broker is not overloaded, "
                "or raise ?connect_timeout=SECONDS", error_code="CONNECT_TIMEOUT")
        if not conn.is_connected():
            raise ConnectionError("the connection closed before CONNECTED arrived")
    except errors.JMSException:
        raise
    except Exception as exc:
        try:
            conn.disconnect()
        except Exception:
            pass
        err = receipts.last_error
        if err is not None:
            text = error_text(*err)
            low = text.lower()
            if "version" in low and version == "1.2":
                log.debug("%s refused STOMP 1.2 (%s); trying 1.1", where, text)
                return None  # a 1.1-only broker: try again with 1.1
            coded = class_for_code(err[0].get(ERROR_CODE_HEADER))  # jmspy broker
            if coded is errors.JMSSecurityException or (
                    coded is None and any(w in low for w in _SECURITY_WORDS)):
                # jmspy broker's text says what to check; a foreign one's may not
                hint = "" if coded is not None else "; check the user name and password"
                raise errors.JMSSecurityException(
                    f"STOMP broker at {where} refused the login"
                    f"{for_user(credentials.user, text)}: {text}{hint}") from exc
            raise errors.JMSException(
                f"STOMP broker at {where} refused the connection: {text}") from exc
        tls_failure = _tls_failure(options)
        if tls_failure is not None:
            raise tls_failure from exc
        raise errors.JMSException(
            f"cannot connect to a STOMP broker at {where} ({type(exc).__name__}): "
            "check that the broker is running, that it has a STOMP listener on that "
            "host and port, and that no firewall is in the way"
        ) from exc
    _no_delay(conn)
    log.debug("connected to %s (STOMP %s, user %s)", where, version,
              credentials.user or "none given")
    return conn, reader
