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

One object per concern, each owning its state: the subscriptions
(:mod:`.subscription`), the connection's tags and delivery counts (:mod:`.deliveries`),
every wait for a RECEIPT (:mod:`.receipts`), hand-backs (:mod:`.redelivery`), drop and
reconnect (:mod:`.failover`), browsing, temporary queues and stats (:mod:`.admin`), and
opening a connection (:mod:`.connect`). Calls made during a reconnect wait for it.

Threading: stomp.py's receiver thread reads the socket; jmspy's codec (:mod:`.receive`)
makes the frames and hands MESSAGEs to :meth:`StompTransport.on_message_frame`, which
converts and buffers (``TransportListener.on_delivery``). User code never runs there, so
a slow ``on_message`` stops neither the receiver nor stomp.py's heart-beat thread.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import SplitResult, urlsplit

from jmspy import errors
from jmspy.capabilities import Feature
from jmspy.destinations import Destination, Queue
from jmspy.logs import transport_logger
from jmspy.message import DeliveryMode, Message, selector_getter
from jmspy.reconnect import ReconnectPolicy, connect_first
from jmspy.transport import (
    ConsumerSpec,
    Credentials,
    RemoteConsumer,
    TransportListener,
)
from jmspy.transports import twins
from jmspy.wire.error_codes import RESOURCE_LIMIT_EXCEEDED
from jmspy.wire.error_text import error_text
from jmspy.wire.headers import SEND_TIMEOUT_HEADER

from ..broker_errors import ERROR_CODE_HEADER
from ..capabilities import native_features, require
from ..destination_options import resolve
from .admin import StompAdmin
from .connect import ConnectOptions, drop, open_stomp, shut_down
from .deliveries import Deliveries
from .failover import Failover
from .mapping import (
    BrokerProfile,
    detect_broker,
    jms_message_id,
    profile_key,
    subscribe_destination,
    to_frame,
)
from .receipts import Receipts
from .receive import FrameReader
from .redelivery import Redelivery
from .subscription import StompSubscription
from .url_options import URL_OPTIONS
from .wire import FrameWriter

#: jmspy broker's ``jmspy-error`` code for a send refused by a limit (space, frame size)
_NO_SPACE = RESOURCE_LIMIT_EXCEEDED
#: MESSAGE frame -> client Message, once per message received (compiled when available)
_received = twins.stomp_received

__all__ = ["StompTransport"]

log = transport_logger("stomp")


class StompTransport:
    """The Transport interface over one stomp.py connection."""

    scheme = "stomp"
    #: No asynchronous send path of its own (persistent sends use the receipt window).
    send_async = None
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
        self._subs: dict[int, StompSubscription] = {}
        self._by_sid: dict[str, StompSubscription] = {}
        self._connected_headers: dict[str, str] = {}
        self._closing = False
        # set while connected, or once reconnecting gave up: waiting calls wake on it
        self._settled = threading.Event()
        self._lost: str | None = None  # why the connection is gone for good
        # The stomp.py connection each open transaction began on: a broker forgets a
        # connection's transactions when it ends, so after a reconnect the old ids name
        # nothing (RabbitMQ answers "Bad transaction", ActiveMQ "Invalid transaction id").
        self._tx_on: dict[str, Any] = {}
        self._deliveries = Deliveries()
        self._receipts = Receipts(self.where, lambda: self._conn, properties,
                                  self._need_reader)
        #: jmspy broker's per-send timeout header, set once the broker is known
        self._send_timeout_header: dict[str, str] = {}
        #: the last ERROR refused a send for lack of space (see .failover)
        self._refused_for_space = False
        self._redelivery = Redelivery(self, self._deliveries)
        self._admin = StompAdmin(self, self._receipts, lambda: self._credentials.client_id)
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
        """A thread waits for a frame: make sure someone reads (see .reading_turn)."""
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
                               self._on_stream_error,
                               max_frame_bytes=self.options.max_frame_bytes,
                               idle_spin_us=self.options.idle_spin_us,
                               one_in_flight=self._one_in_flight)

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
            self._report(errors.JMSException(
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
            self._drop_deliveries()
        return True

    def _drop_deliveries(self) -> None:
        # Lock held. Every tag of the dropped connection is dead; credit is gone with it.
        for sub in self._subs.values():
            sub.connection_lost()
        self._deliveries.connection_lost()
        self._by_sid.clear()

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
                for sub in list(self._subs.values()):
                    self._subscribe(sub, same_id=True)
        except Exception as exc:  # dropped again while re-subscribing: try again
            with self._lock:
                self._conn = None
                self._drop_deliveries()
            raise errors.JMSException(f"re-subscribing failed: {exc}") from exc

    def io_failed(self, error: BaseException) -> None:
        """An error escaped a call on this connection's I/O path (the core caught it on a
        dispatcher thread): the connection is lost, and Failover takes it from there."""
        self._lose(self._conn)

    def _lose(self, conn: Any) -> None:
        if conn is not None and conn is self._conn:
            shut_down(conn)  # the reader sees the end: Failover.connection_lost

    def _io_error(self, conn: Any, exc: Exception, doing: str) -> errors.JMSException:
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
        self._close_connection()
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

    # -- consumers ------------------------------------------------------------------------
    def create_consumer(self, spec: ConsumerSpec) -> RemoteConsumer:
        sub = self._subscription(spec)
        # The SUBSCRIBE asks for a RECEIPT and create_consumer waits for it: once it
        # returns, the broker has the subscription, so a message published after that (from
        # any connection) reaches this topic consumer, and a refused SUBSCRIBE fails here.
        receipt, event = self._receipts.expect(keep_answer=True)
        conn = self._conn
        with self._lock:
            self._subs[spec.consumer_id] = sub
            self._subscribe(sub, receipt=receipt)
        try:
            self._receipts.wait(receipt, event, conn)
        except errors.JMSException:
            with self._lock:  # refused or dropped: there is no subscription to close later
                self._subs.pop(spec.consumer_id, None)
                self._by_sid.pop(sub.sub_id, None)
            raise
        finally:
            answer = self._receipts.answer(receipt)
        return RemoteConsumer(destination_flow_limit=sub.destination_limit(answer))

    def _subscription(self, spec: ConsumerSpec) -> StompSubscription:
        return StompSubscription.for_spec(
            spec, self.profile, self.require, self._admin.durable_queue,
            discard_queue_selectors=self.options.queue_selectors_discard)

    def _subscribe(self, sub: StompSubscription, *, same_id: bool = False,
                   receipt: str = "") -> None:
        if not same_id:
            sub.sub_id = f"{sub.spec.consumer_id}-{uuid.uuid4().hex[:6]}"
        if sub.copies:  # a new subscription (after a reconnect): the old copies are dead
            sub.copies.clear()
        if sub.spec.durable and self.profile.family == "RabbitMQ":
            assert sub.spec.subscription_name is not None
            sub.sub_id = sub.spec.subscription_name
        self._by_sid[sub.sub_id] = sub
        headers = dict(sub.headers)
        if receipt:
            headers["receipt"] = receipt
        destination = subscribe_destination(sub.spec.destination, self.profile)
        log.debug("SUBSCRIBE %s id=%s on %s%s", destination, sub.sub_id, self.where,
                  " (again, after a reconnect)" if same_id else "")
        self.connection(wait=False).subscribe(
            destination, id=sub.sub_id, ack="client-individual", headers=headers)

    def _unsubscribe(self, sub: StompSubscription) -> None:
        # No ``durable`` header: on RabbitMQ an UNSUBSCRIBE with ``durable:true`` deletes
        # the subscription's queue, and closing a durable consumer must keep it.
        self._by_sid.pop(sub.sub_id, None)
        self.connection(wait=False).unsubscribe(id=sub.sub_id)

    def resubscribe(self, sub: StompSubscription) -> None:
        """(Redelivery, lock held) UNSUBSCRIBE and SUBSCRIBE again: the broker then
        redelivers every unacknowledged message of the subscription, in order."""
        self._unsubscribe(sub)
        self._subscribe(sub)

    def has_durable_consumer(self, name: str) -> bool:
        with self._lock:
            return any(s.spec.durable and s.spec.subscription_name == name
                       for s in self._subs.values())

    def close_consumer(self, consumer_id: int) -> None:
        with self._lock:
            sub = self._subs.pop(consumer_id, None)
            if sub is None:
                return
            if self._conn is None:  # down: the broker dropped the subscription already
                self._by_sid.pop(sub.sub_id, None)
                return
            try:
                if self.profile.cancel == "nack":
                    # RabbitMQ keeps a cancelled consumer's unacked messages on the channel
                    # until it closes: hand them back explicitly first.
                    self._redelivery.nack(sub, list(sub.unacked))
                self._unsubscribe(sub)
            except OSError:  # the socket died before stomp.py told us: so did the
                self._by_sid.pop(sub.sub_id, None)  # subscription, on the broker too
            for tag in list(sub.unacked):
                self._deliveries.forget(tag)
            sub.stash.clear()

    def grant_credit(self, consumer_id: int, credits: int) -> None:
        conn = self._conn
        try:
            with self._lock:
                sub = self._subs.get(consumer_id)
                if sub is None:
                    return
                self._redelivery.flush(sub)
                sub.credit += credits
                self.release(sub)
        except errors.JMSException:
            raise
        except Exception as exc:  # a NACK or an auto-ack ACK written into a dead socket
            raise self._io_error(conn, exc, "granting credit") from exc

    def revoke_credit(self, consumer_id: int) -> int:
        """Prefetch brokers cannot take credit back, so it returns to the core here and
        anything the broker still sends waits in the stash until credit is granted."""
        with self._lock:
            sub = self._subs.get(consumer_id)
            return 0 if sub is None else sub.take_credit()

    def release(self, sub: StompSubscription) -> None:
        """(Lock held.) Hand ``sub``'s stashed deliveries to the core as credit allows."""
        listener = self._listener
        if listener is None:
            return
        consumer_id = sub.spec.consumer_id
        if sub.spec.auto_ack:
            def hand(tag: int, message: Message, count: int) -> None:
                self._send_ack(sub, tag, None)
                listener.on_delivery(consumer_id, tag, message, count)
        else:
            def hand(tag: int, message: Message, count: int) -> None:
                listener.on_delivery(consumer_id, tag, message, count)
        sub.release(hand)

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True) -> None:
        conn = self._conn
        try:
            with self._lock:
                self._redelivery.cancel(delivery_tags, redelivered=redelivered)
        except errors.JMSException:
            raise
        except Exception as exc:
            raise self._io_error(conn, exc, "handing messages back") from exc

    def _one_in_flight(self) -> bool:
        """Every subscription at window 1 (or none): request/response, where the reading
        turn's polling window may grow (jmspy/idle_spin.py). A snapshot, no lock."""
        return all(sub.spec.flow_limit <= 1 for sub in tuple(self._by_sid.values()))

    # -- receiving (stomp.py's receiver thread) -------------------------------------------
    def on_message_frame(self, headers: dict[str, str], body: bytes) -> None:
        ack_id = headers.get("ack") or headers.get("message-id", "")
        sid = headers.get("subscription", "")
        reply = self._admin.reply_handler(sid)
        if reply is not None:  # a browse or a stats request collecting its answer
            reply(headers, body)
            return
        # Converting needs no lock: taking it only for the bookkeeping keeps the
        # dispatcher thread's ACKs (which need it too) from queueing behind the parse.
        try:
            message: Message | None = _received.from_frame(headers, body)
            problem = ""
        except Exception as exc:  # a frame we cannot read must not kill the receiver
            message, problem = None, str(exc)
        deliveries = self._deliveries
        with self._lock:
            sub = self._by_sid.get(sid)
            if sub is None:
                # A subscription we dropped: ActiveMQ has it back already (unsubscribe
                # returns unacked messages); elsewhere hand it back explicitly.
                if self.profile.cancel == "nack" and self._conn is not None and ack_id:
                    self.send_nack(ack_id, sid)
                key = jms_message_id(headers)
                if key:
                    deliveries.never_seen(key)
                return
            if sub.fence and headers.get("redelivered", "").lower() == "true":
                sub.fence = False  # the broker is past our NACKs: nothing older follows
            elif sub.fence:
                # Sent before the broker took our NACKs back: it is younger than them in
                # the queue, so it goes back too (to its own place) or it would overtake.
                self.send_nack(ack_id, sid)
                key = jms_message_id(headers)
                if key:
                    deliveries.never_seen(sub.count_key(key))
                return
            if message is None:
                self._report(errors.MessageFormatException(
                    f"unreadable STOMP MESSAGE {headers.get('message-id')} from {self.where}: "
                    f"{problem}"))
                self.send_nack(ack_id, sid)
                return
            tag = deliveries.new(sub)
            sub.received(tag, ack_id)
            if sub.client_selector is not None and not sub.client_selector.matches(
                selector_getter(message)
            ):
                sub.selector_dropped += 1
                self._send_ack(sub, tag, None)
                return
            key = sub.count_key(message.message_id or ack_id)
            deliveries.set_key(tag, key)
            if sub.copies is not None:
                sub.copies[tag] = (headers, body)
            message.delivery_time = message.timestamp
            sub.stash.append((tag, message, deliveries.delivery_count(key, headers)))
            self.release(sub)

    def _on_stream_error(self, text: str) -> None:
        self._report(errors.JMSException(f"STOMP broker at {self.where}: {text}"))

    def _report(self, error: errors.JMSException) -> None:
        if self._listener is not None:
            self._listener.on_transport_error(error)

    # -- acknowledgement ------------------------------------------------------------------
    def _send_ack(self, sub: StompSubscription, tag: int, tx: str | None) -> None:
        ack_id = sub.unacked.pop(tag, None)
        self._deliveries.settle(tag)
        if sub.copies is not None:
            sub.copies.pop(tag, None)
        if ack_id is None:
            return
        if self.version == "1.2":
            self.connection(wait=False).ack(ack_id, transaction=tx)
        else:
            self.connection(wait=False).ack(ack_id, sub.sub_id, transaction=tx)

    def send_nack(self, ack_id: str, sid: str) -> None:
        if self.version == "1.2":
            self.connection(wait=False).nack(ack_id)
        else:
            self.connection(wait=False).nack(ack_id, sid)

    def ack(self, delivery_tags: list[int], tx: str | None = None) -> None:
        """The bookkeeping under the lock, the ACK frames after it: stomp.py's receiver
        thread needs the lock for every MESSAGE, and a socket write under it made the
        receiver wait for this thread's syscalls (measured: the lock was the hottest spot
        of a client-ack consumer). The frames still go out before this returns, in the
        order given, so an acknowledged message is never redelivered."""
        settle = self._deliveries.settle
        with self._lock:
            conn = self._conn
            out: list[tuple[str, str]] = []
            for tag in delivery_tags:
                sub = settle(tag)
                if sub is None:  # handed back meanwhile (ActiveMQ re-subscribe)
                    continue
                if sub.copies is not None:
                    sub.copies.pop(tag, None)
                ack_id = sub.unacked.pop(tag, None)
                if ack_id is not None:
                    out.append((ack_id, sub.sub_id))
        if not out:
            return
        if conn is None:
            conn = self.connection(wait=False)  # raises: closed, or down (broker redelivers)
        if tx is not None:
            self._check_tx(tx, conn)
        try:
            self._writer_for(conn).ack(out, tx)
        except Exception as exc:  # ConnectionResetError, BrokenPipeError, stomp.py's own
            raise self._io_error(conn, exc, "acknowledging") from exc

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
    def send(self, message: Message, tx: str | None = None) -> None:
        try:
            destination, body, headers = to_frame(message, self.profile)
        except ValueError:  # the profile has no delivery-delay header
            self.require(Feature.DELIVERY_DELAY)
            raise
        if tx is not None:
            headers["transaction"] = tx
        elif self._send_timeout_header:
            headers.update(self._send_timeout_header)
        error_before = self._receipts.connection_error
        try:
            if tx is not None:  # COMMIT confirms
                conn = self.connection()
                if self._tx_on.get(tx) is not conn:
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
            raise errors.JMSException(
                f"sending to the STOMP broker at {self.where} failed ({type(exc).__name__}: "
                f"{exc}); the connection dropped",
                error_code="CONNECTION_INTERRUPTED") from exc

    def begin(self, tx: str) -> None:
        conn = self.connection()
        try:
            conn.begin(tx)
        except Exception as exc:
            raise self._io_error(conn, exc, "beginning a transaction") from exc
        self._tx_on[tx] = conn

    def _check_tx(self, tx: str, conn: Any) -> None:
        """Refuse to commit (or ack in) a transaction of a connection that dropped: the
        broker rolled it back when that connection ended."""
        if self._tx_on.get(tx) is not conn:
            self._tx_on.pop(tx, None)
            raise errors.JMSException(
                f"transaction {tx} began on a connection to the STOMP broker that has "
                f"since dropped (now on {self.where}); the broker rolled it back",
                error_code="TRANSACTION_LOST")

    def commit(self, tx: str) -> None:
        self._receipts.settle_sends()  # a windowed send's refusal is raised here first
        conn = self.connection()
        self._check_tx(tx, conn)
        try:
            self._receipts.request(conn.commit, tx, send=True,
                                   headers=self._send_timeout_header)
        except errors.JMSException:
            raise
        except Exception as exc:
            raise self._io_error(conn, exc, "committing") from exc
        self._tx_on.pop(tx, None)

    def rollback(self, tx: str) -> None:
        began_on = self._tx_on.pop(tx, None)
        if self._conn is None and self._lost:  # gone for good: so is the transaction
            return  # (a commit failing on a refused send rolls back after the close)
        if began_on is None or began_on is not self._conn:
            return  # its connection dropped: the broker rolled it back then
        try:
            self.connection().abort(tx)
        except OSError:
            # The socket closed under the ABORT (the broker closes right after the ERROR
            # that failed a commit, before stomp.py reports the drop): a STOMP broker
            # aborts the transactions of a connection that ends, so nothing is left open.
            return

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
        with self._lock:
            sub = self._subs.get(consumer_id)
            return {} if sub is None else sub.state()
