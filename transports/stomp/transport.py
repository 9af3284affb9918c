"""``stomp://host:port[?version=1.1&heartbeat=10000&vhost=/]``: STOMP through stomp.py.

One stomp.py connection per jmspy connection. The broker is recognised from CONNECTED's
``server`` header and its :class:`~jmspy.transports.stomp.mapping.BrokerProfile` decides
how each feature is carried (docs/transports.md has the table).

Flow control. jmspy's core runs the Open MQ window itself and calls
:meth:`StompTransport.grant_credit` when the window says so. Brokers offer less:

* ActiveMQ 5 / RabbitMQ have a *prefetch*: at most N unacknowledged messages in flight.
  The consumer subscribes with N = its effective limit, so the broker never has more than
  the window out. ACKs go out the moment JMS says a message is consumed (an acknowledged
  message is never redelivered), which lets the broker refill one slot per ACK; the
  Open MQ *threshold* (top up in batches) is applied between this transport and the
  consumer's buffer: deliveries beyond the credit the core granted wait in a per-consumer
  *stash* and are handed over when the core grants more. In broker stats the window is
  therefore a sliding one; the batches are visible in ``consumer.flow_stats()``.
* jmspy's own broker takes the window natively (``jmspy-flow-limit`` /
  ``jmspy-flow-threshold`` on SUBSCRIBE) and tops up by the same rule itself.
* Artemis's ``consumer-window-size`` is in bytes: limit x 1 KiB (an assumed average
  message size); the stash still bounds what the consumer sees in messages.

The stash is also how :meth:`revoke_credit` works on prefetch brokers (they cannot take
credit back): the credit returns to the core and whatever the broker still sends waits.

One object per concern, each owning its state: the consumers and what they receive
(:mod:`.consumers`, one :mod:`.subscription` each), the connection's tags and delivery
counts (:mod:`.deliveries`), open transactions (:mod:`.transactions`),
every wait for a RECEIPT (:mod:`.receipts`), hand-backs (:mod:`.redelivery`), drop and
reconnect (:mod:`.failover`), browsing, temporary queues and stats (:mod:`.admin`), and
opening a connection (:mod:`.connect`). Calls made during a reconnect wait for it.

Threading: stomp.py's receiver thread reads the socket; jmspy's codec (:mod:`.receive`)
makes the frames and hands MESSAGEs to :meth:`StompTransport.on_message_frame`, whose
consumers convert and buffer (``TransportListener.on_delivery``). User code never runs
there, so a slow ``on_message`` stops neither the receiver nor stomp.py's heart-beat
thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import SplitResult, urlsplit

from jmspy import errors
from jmspy.capabilities import Feature
from jmspy.destinations import Destination, Queue
from jmspy.logs import transport_logger
from jmspy.message import DeliveryMode, Message
from jmspy.reconnect import ReconnectPolicy, connect_first
from jmspy.transport import (
    ConsumerSpec,
    Credentials,
    RemoteConsumer,
    TransportListener,
)
from jmspy.wire.error_codes import RESOURCE_LIMIT_EXCEEDED
from jmspy.wire.error_text import error_text
from jmspy.wire.headers import LEASE, LEASE_FROM, LEASE_TTL, SEND_TIMEOUT_HEADER

from ..broker_errors import ERROR_CODE_HEADER
from ..capabilities import native_features, require
from ..destination_options import resolve
from .admin import StompAdmin
from .async_sends import Done, write_nothing
from .connect import ConnectOptions, drop, open_stomp, shut_down
from .consumers import StompConsumers
from .deliveries import Deliveries
from .failover import Failover
from .mapping import BrokerProfile, detect_broker, profile_key, to_frame
from .receipts import Receipts
from .receive import FrameReader
from .transactions import StompTransactions
from .url_options import URL_OPTIONS
from .wire import FrameWriter

#: jmspy broker's ``jmspy-error`` code for a send refused by a limit (space, frame size)
_NO_SPACE = RESOURCE_LIMIT_EXCEEDED

__all__ = ["StompTransport"]

log = transport_logger("stomp")


class StompTransport:
    """The Transport interface over one stomp.py connection."""

    scheme = "stomp"
    #: jmspy broker counts ACKs against the connection flow limit: nothing to tell it
    release_flow = None
    capabilities: frozenset[Feature] = frozenset()  # set per connection from the matrix
    in_process = False

    #: It connects along an address list (imqAddressList) and moves along it on a drop.
    address_lists = True
    #: The query options each scheme's URLs take (checked when the factory is made).
    url_options = URL_OPTIONS

    def __init__(self, url: SplitResult, properties: Mapping[str, Any]) -> None:
        listed = properties.get("imqAddressList")
        #: the brokers of the address list (one: the URL), each with its URL's options
        self._addresses = [ConnectOptions.parse(urlsplit(address), properties)
                           for address in (listed.split(",") if listed else [])] or [
                               ConnectOptions.parse(url, properties)]
        self.options = options = self._addresses[0]
        self.host, self.port, self.version = options.host, options.port, options.version
        self.scheme = "stomp" if options.tls is None else "stomp+ssl"  # for conn.where
        self.profile: BrokerProfile = detect_broker(None)
        self.reconnect = ReconnectPolicy.from_properties(properties)
        self._conn: Any = None
        self._reader: FrameReader | None = None  # jmspy's frame reading, when in place
        self._writer: FrameWriter | None = None  # SEND/ACK frames of the live connection
        self._listener: TransportListener | None = None
        self._credentials = Credentials()
        self._lock = threading.RLock()
        self._connected_headers: dict[str, str] = {}
        self._closing = False
        # set while connected, or once reconnecting gave up: waiting calls wake on it
        self._settled = threading.Event()
        self._lost: str | None = None  # why the connection is gone for good
        self._deliveries = Deliveries()
        self._receipts = Receipts(self.where, lambda: self._conn, properties,
                                  self._need_reader)
        #: jmspy broker's per-send timeout header, set once the broker is known
        self._send_timeout_header: dict[str, str] = {}
        #: the last ERROR refused a send for lack of space (see .failover)
        self._refused_for_space = False
        self._admin = StompAdmin(self, self._receipts, lambda: self._credentials.client_id)
        self._consumers = StompConsumers(self, self._lock, self._deliveries, self._receipts,
                                         self._admin)
        self._transactions = StompTransactions(self, self._receipts)
        self._failover = Failover(self, f"jmspy-stomp-reconnect-{self.port}")

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def address_count(self) -> int:
        return len(self._addresses)

    def _use(self, index: int) -> None:
        """Connect to address ``index`` of the list from now on (before connecting)."""
        self.options = options = self._addresses[index]
        self.host, self.port = options.host, options.port
        self.scheme = "stomp" if options.tls is None else "stomp+ssl"  # for conn.where
        self._receipts.where = self.where

    def _need_reader(self) -> None:
        """A thread waits for a frame: make sure someone reads (see ..reading_turn)."""
        reader = self._reader
        if reader is not None:
            reader.need_reader()

    @property
    def broker_connection_flow(self) -> bool:
        """jmspy broker echoed ``jmspy-connection-flow-limit``: it enforces the cap."""
        return bool(self._connected_headers.get("jmspy-connection-flow-limit"))

    @property
    def listener(self) -> TransportListener | None:
        return self._listener

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def live(self) -> Any:
        """The stomp.py connection in use, or None while down or closed."""
        return self._conn

    @property
    def lost(self) -> str | None:
        """Why the connection is gone for good (None: it is not)."""
        return self._lost

    @property
    def send_timeout_header(self) -> dict[str, str]:
        """jmspy broker's per-send timeout header (empty elsewhere)."""
        return self._send_timeout_header

    # -- connection -----------------------------------------------------------------------
    def open(self, listener: TransportListener, credentials: Credentials) -> None:
        self._listener = listener
        self._credentials = credentials
        connect_first(self.reconnect, [
            f"{'stomp' if a.tls is None else 'stomp+ssl'}://{a.where}"
            for a in self._addresses], self._open_at)
        self.profile = detect_broker(self._connected_headers.get("server"),
                                     self.options.dialect)
        timeout = self._receipts.send_timeout_ms  # jmspy broker fails a held send itself
        self._send_timeout_header = ({SEND_TIMEOUT_HEADER: str(timeout)}
                                     if timeout > 0 and self.profile.family == "jmspy" else {})
        self.capabilities = native_features("stomp", profile_key(self.profile))
        self._settled.set()

    def _open_at(self, index: int) -> None:
        """The first CONNECT, to address ``index``: 1.2, falling back to 1.1."""
        self._use(index)
        requested = self._addresses[index].version
        versions = [requested] if requested == "1.1" else ["1.2", "1.1"]
        for version in versions:
            if self._connect(version):
                self.version = version
                break

    def _connect(self, version: str) -> bool:
        def reader(stomp_transport: Any) -> FrameReader:
            return FrameReader(stomp_transport, version, self.on_message_frame,
                               self.on_stream_error,
                               max_frame_bytes=self.options.max_frame_bytes,
                               idle_spin_us=self.options.idle_spin_us,
                               one_in_flight=self._consumers.one_in_flight)

        opened = open_stomp(self.options, version, self._credentials, self, self._receipts,
                            reader)
        if opened is None:
            return False
        self._conn, self._reader = opened
        return True

    # what connect.Receiver reports (stomp.py's receiver thread)
    def on_connected_frame(self, headers: dict[str, str]) -> None:
        self._connected_headers = headers

    def on_error_frame(self, headers: dict[str, str], body: Any) -> None:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
        log.debug("ERROR from %s: %s", self.where, error_text(headers, text))
        self._refused_for_space = headers.get(ERROR_CODE_HEADER) == _NO_SPACE
        self._receipts.on_error(headers, text)
        if self._conn is not None:
            self.report(errors.JMSException(
                f"STOMP broker at {self.where} reported an error: {error_text(headers, text)}"))

    def on_receipt(self, receipt_id: str, headers: dict[str, str]) -> None:
        self._receipts.on_receipt(receipt_id, headers)

    def on_disconnected(self, conn: Any) -> None:
        if conn is self._conn:  # not a stale connection
            self._failover.connection_lost()

    # what Failover steers
    def connection_dropped(self) -> bool:
        if self._conn is None or self._closing:
            return False
        with self._lock:
            self._settled.clear()
            self._conn = None
            self._consumers.connection_lost()
        self._receipts.async_sends.connection_dropped(self.broker_error)
        return True

    @property
    def refused_for_space(self) -> bool:
        return self._refused_for_space

    @property
    def broker_error(self) -> str | None:
        err = self._receipts.connection_error
        return None if err is None else error_text(*err)

    def connect_again(self, address: int | None = None) -> None:
        self._refused_for_space = False
        if address is not None:
            self._use(address)
        self._connect(self.version)
        try:
            with self._lock:
                self._consumers.subscribe_again()
        except Exception as exc:  # dropped again while re-subscribing: try again
            with self._lock:
                self._conn = None
                self._consumers.connection_lost()
            raise errors.JMSException(f"re-subscribing failed: {exc}") from exc
        self._receipts.async_sends.flush_parked()  # sends made while it was down

    def io_failed(self, error: BaseException) -> None:
        """An error escaped a call on this connection's I/O path (the core caught it on a
        dispatcher thread): the connection is lost, and Failover takes it from there."""
        self._lose(self._conn)

    def _lose(self, conn: Any) -> None:
        if conn is not None and conn is self._conn:
            shut_down(conn)  # the reader sees the end: Failover.connection_lost

    def write_failed(self, conn: Any, exc: Exception, doing: str) -> errors.JMSException:
        """A write on ``conn`` failed (an OSError, or stomp.py's own exception): the
        connection is lost; the JMSException that says so (the broker's ERROR when it
        refused and closed)."""
        refused = self._receipts.refusal_behind(conn, None, doing)
        self._lose(conn)
        if refused is not None:
            return refused
        return errors.JMSException(
            f"{doing} on the STOMP connection to {self.where} failed "
            f"({type(exc).__name__}: {exc}); the connection is lost: what was not "
            "acknowledged comes back from the broker, marked redelivered",
            error_code="CONNECTION_INTERRUPTED")

    def settle(self, lost: str | None) -> None:
        if lost is not None:
            self._lost = lost
            self._receipts.async_sends.fail_all(lambda what: errors.JMSException(
                f"{lost}; {what} was not sent", error_code="CONNECTION_LOST"))
        self._settled.set()

    def close(self) -> None:
        """Close; a refusal of a windowed persistent send (``persistentSendWindow``
        > 1) not yet raised is raised after the connection is closed."""
        refused: errors.JMSException | None = None
        receipts = self._receipts
        if receipts.sends_in_flight:  # their outcome (also when the broker closed after an
            try:  # ERROR)
                receipts.settle_sends(receipts.drain_timeout)
            except errors.JMSException as exc:
                refused = exc
        if self._conn is not None:  # asynchronous sends: the broker's answers first
            receipts.async_sends.wait_settled(receipts.drain_timeout)
        try:
            self._close_connection()
        finally:
            receipts.async_sends.fail_all(lambda what: errors.JMSException(
                f"the STOMP connection to {self.where} closed before the broker confirmed "
                f"{what}", error_code="CONNECTION_CLOSED"))
        if refused is not None:
            raise refused

    def _close_connection(self) -> None:
        self._closing = True
        self._settled.set()  # release calls waiting for a reconnect
        conn = self._conn
        if conn is None:
            return
        confirmed = True
        try:
            if conn.is_connected():
                confirmed = self._receipts.disconnect(conn)  # waits closeTimeout at most
        except Exception:
            pass
        finally:
            self._conn = None
            drop(conn)
        if not confirmed:
            raise errors.JMSException(
                f"the STOMP broker at {self.where} did not confirm the DISCONNECT within "
                f"closeTimeout={self._receipts.drain_timeout:g} s; the connection was closed "
                "anyway, and acknowledgements it had not processed yet are lost (their "
                "messages come back, marked redelivered); raise closeTimeout for a slow "
                "broker", error_code="CLOSE_TIMEOUT")

    def connection(self, wait: bool = True) -> Any:
        """The live stomp.py connection; during a reconnect, wait for its outcome (not
        with ``self._lock`` held: ``wait=False`` there, the reconnect thread needs it)."""
        if wait and not self._closing and not self._settled.is_set():
            self._settled.wait()  # (is_set first: wait() takes a lock even when set)
        conn = self._conn
        if conn is None:
            if self._closing:
                raise errors.IllegalStateException(
                    f"the STOMP connection to {self.where} is closed")
            raise errors.JMSException(
                self._lost or f"the STOMP connection to {self.where} is down (reconnecting)",
                error_code="CONNECTION_LOST" if self._lost else "CONNECTION_INTERRUPTED",
            )
        return conn

    def require(self, feature: Feature, detail: str = "") -> None:
        """Raise the capability matrix's refusal when this broker cannot carry ``feature``
        (the matrix reads the same broker profile that picks the headers below)."""
        require("stomp", profile_key(self.profile), feature, detail=detail,
                where=f"{self.profile.server or 'unknown server'} at {self.where}")

    def declare_destination(self, destination: Destination) -> None:
        """Refuse destination options this broker cannot carry, now (the rest ride on
        each SEND and SUBSCRIBE: see .destination_options)."""
        resolve("stomp", profile_key(self.profile), destination,
                where=f"{self.profile.server or 'unknown server'} at {self.where}")

    # -- consumers (StompConsumers) -------------------------------------------------------
    def create_consumer(self, spec: ConsumerSpec) -> RemoteConsumer:
        return self._consumers.create_consumer(spec)

    def has_durable_consumer(self, name: str) -> bool:
        return self._consumers.has_durable_consumer(name)

    def close_consumer(self, consumer_id: int) -> None:
        self._consumers.close_consumer(consumer_id)

    def grant_credit(self, consumer_id: int, credits: int) -> None:
        self._consumers.grant_credit(consumer_id, credits)

    def revoke_credit(self, consumer_id: int) -> int:
        return self._consumers.revoke_credit(consumer_id)

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True) -> None:
        self._consumers.cancel(delivery_tags, redelivered=redelivered)

    # -- receiving (stomp.py's receiver thread) -------------------------------------------
    def on_message_frame(self, headers: dict[str, str], body: bytes) -> None:
        self._consumers.on_message_frame(headers, body)

    def on_stream_error(self, text: str) -> None:
        self.report(errors.JMSException(f"STOMP broker at {self.where}: {text}"))

    def report(self, error: errors.JMSException) -> None:
        if self._listener is not None:
            self._listener.on_transport_error(error)

    # -- acknowledgement ------------------------------------------------------------------
    def ack(self, delivery_tags: list[int], tx: str | None = None,
            extra: tuple[tuple[str, str], ...] = ()) -> None:
        """The bookkeeping under the lock, the ACK frames after it: stomp.py's receiver
        thread needs the lock for every MESSAGE, and a socket write under it made the
        receiver wait for this thread's syscalls (measured: the lock was the hottest spot
        of a client-ack consumer). The frames still go out before this returns, in the
        order given, so an acknowledged message is never redelivered. ``extra``: headers
        of every ACK frame (:meth:`lend`'s)."""
        with self._lock:
            conn = self._conn
            out = self._consumers.settle_acked(delivery_tags)
        if not out:
            return
        if conn is None:
            conn = self.connection(wait=False)  # raises: closed, or down (broker redelivers)
        if tx is not None:
            self._transactions.check(tx, conn)
        try:
            writer = self._writer_for(conn)
            if extra:
                writer.ack(out, tx, extra)
            else:
                writer.ack(out, tx)
        except Exception as exc:  # ConnectionResetError, BrokenPipeError, stomp.py's own
            raise self.write_failed(conn, exc, "acknowledging") from exc

    def lend(self, delivery_tags: list[int], token: str, ttl_ms: int | None) -> None:
        """ACKs that lend the deliveries to ``token`` (jmspy broker's reading leases): on
        STOMP 1.2 one per run of a subscription's deliveries (``jmspy-lease-from``), so a
        reader's whole share goes in one frame."""
        self.require(Feature.READING_LEASES)
        extra = ((LEASE, token),) if ttl_ms is None else (
            (LEASE, token), (LEASE_TTL, str(ttl_ms)))
        if self.version != "1.2":  # acks by message id: one ACK each
            self.ack(delivery_tags, None, extra)
            return
        with self._lock:
            conn = self._conn
            runs = self._consumers.lend_runs(delivery_tags)
        if not runs:
            return
        if conn is None:
            conn = self.connection(wait=False)  # raises: closed, or down
        try:
            writer = self._writer_for(conn)
            for first, last, sid in runs:
                writer.ack([(last, sid)], None, extra if first == last
                           else (*extra, (LEASE_FROM, first)))
        except Exception as exc:  # ConnectionResetError, BrokenPipeError, stomp.py's own
            raise self.write_failed(conn, exc, "lending") from exc

    def settle_leases(self, tokens: list[str], *, release: bool = False) -> int:
        self.require(Feature.READING_LEASES)
        return self._admin.settle_leases(tokens, release)

    def try_ack(self, delivery_tags: list[int]) -> bool:
        """Never declines: the lock above is held only for bookkeeping, not for another
        thread's work (see ``Transport.try_ack``)."""
        self.ack(delivery_tags)
        return True

    def _writer_for(self, conn: Any) -> FrameWriter:
        writer = self._writer
        if writer is None or writer.conn is not conn:  # first use, or reconnected
            writer = self._writer = FrameWriter(conn, self.version)
        return writer

    # -- sending and transactions ---------------------------------------------------------
    def _frame_of(self, message: Message, tx: str | None) -> tuple[str, bytes, dict[str, str]]:
        try:
            destination, body, headers = to_frame(message, self.profile)
        except ValueError:  # the profile has no delivery-delay header
            self.require(Feature.DELIVERY_DELAY)
            raise
        if tx is not None:
            headers["transaction"] = tx
        elif self._send_timeout_header:
            headers.update(self._send_timeout_header)
        return destination, body, headers

    def send_async(self, message: Message, tx: str | None, done: Done) -> None:
        """``Transport.send_async`` (:mod:`.async_sends`): the SEND is written now (or,
        while a reconnect is in progress, once it is done), and ``done`` is called in
        send order when the broker has answered what this send waits for."""
        if self._closing or self._lost:
            self.connection(wait=False)  # raises: closed, or lost for good
        destination, body, headers = self._frame_of(message, tx)
        live = self._conn
        if tx is not None and live is not None:  # a BEGIN that never went out goes now
            self._transactions.open_on(tx, live)
        persistent = tx is None and message.delivery_mode == DeliveryMode.PERSISTENT
        sends = self._receipts.async_sends
        receipts = self._receipts

        def prepare(conn: Any) -> tuple[str | None, Callable[[dict[str, str]], None]]:
            if tx is not None and not self._transactions.began_on(tx, conn):
                return None, write_nothing  # a transaction of a dropped connection
            receipt = (sends.receipt_id() if persistent or (
                tx is None and receipts.checkpoint_due(len(body))) else None)

            def write(extra: dict[str, str]) -> None:
                if extra:
                    headers.update(extra)
                try:
                    self._writer_for(conn).send(destination, body, headers)
                except Exception as exc:  # the socket dropped under this send
                    self._lose(conn)
                    if receipt is not None:
                        return  # the drop (or the ERROR that explains it) reports it
                    raise self._send_failed(exc) from exc
            return receipt, write

        sends.send(prepare, f"the {'persistent ' if persistent else ''}message "
                   f"{message.message_id} to {destination}", done)

    def _send_failed(self, exc: Exception) -> errors.JMSException:
        """The error of a SEND whose write failed: the socket dropped under it."""
        return errors.JMSException(
            f"sending to the STOMP broker at {self.where} failed ({type(exc).__name__}: "
            f"{exc}); the connection dropped", error_code="CONNECTION_INTERRUPTED")

    def send(self, message: Message, tx: str | None = None) -> None:
        destination, body, headers = self._frame_of(message, tx)
        error_before = self._receipts.connection_error
        try:
            if tx is not None:  # COMMIT confirms
                conn = self.connection()
                if not self._transactions.open_on(tx, conn):
                    return  # a transaction of a dropped connection: its commit fails
                self._writer_for(conn).send(destination, body, headers)
            elif message.delivery_mode == DeliveryMode.PERSISTENT:
                self._receipts.send_confirmed(
                    self.connection,
                    lambda c, h: self._writer_for(c).send(destination, body, h),
                    headers, f"the persistent message {message.message_id} to {destination}")
            else:  # non-persistent: a receipt now and then (producer flow control)
                self._receipts.send_checkpointed(
                    self.connection,
                    lambda c, h: self._writer_for(c).send(destination, body, h),
                    headers, len(body), f"the message {message.message_id} to {destination}")
        except errors.JMSException:
            raise
        except Exception as exc:  # the socket dropped under this send
            writer = self._writer
            conn = writer.conn if writer is not None else None
            refused = self._receipts.refusal_behind(
                conn, error_before, f"the message {message.message_id} to {destination}")
            self._lose(conn)
            if refused is not None:  # the broker said why (an ERROR, then it closed)
                raise refused from None
            raise self._send_failed(exc) from exc

    def begin(self, tx: str) -> None:
        self._transactions.begin(tx)

    def commit(self, tx: str) -> None:
        self._transactions.commit(tx)

    def rollback(self, tx: str) -> None:
        self._transactions.rollback(tx)

    # -- management (StompAdmin) ----------------------------------------------------------
    def browse(self, queue: Queue, selector: str | None) -> list[Message]:
        return self._admin.browse(queue, selector)

    def unsubscribe(self, name: str) -> None:
        self._admin.unsubscribe(name)

    def create_temporary_queue(self) -> str:
        return self._admin.create_temporary_queue()

    def delete_temporary_queue(self, name: str) -> None:
        self._admin.delete_temporary_queue(name)

    def destination_stats(self, destination: Destination) -> dict[str, Any]:
        return self._admin.destination_stats(destination)

    def consumer_state(self, consumer_id: int) -> dict[str, int]:
        """Transport-side counters of one consumer (for tests and troubleshooting)."""
        return self._consumers.state(consumer_id)
