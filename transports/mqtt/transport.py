"""``mqtt://host:port[?version=5|3.1.1&keepalive=30&sync_send=true&send_window=100]``: MQTT
through paho-mqtt 2.

One paho client (CallbackAPIVersion.VERSION2, ``manual_ack=True``) per jmspy connection.
The default tries MQTT 5 and falls back to 3.1.1 when the broker refuses it (ActiveMQ 5.17
and RabbitMQ 3.10 close the socket on a v5 CONNECT). docs/mqtt.md has the per-broker table.

Acknowledgement (PUBACKs in receipt order) and redelivery (MQTT has no NACK): see
:mod:`.inbound`, which does both.

Flow control. MQTT 5's Receive Maximum (a CONNECT property, per connection) bounds the
QoS 1 messages the broker has in flight to us; it carries ``imqConnectionFlowLimit``
when that is enabled, else ``imqConsumerFlowLimit`` (exact for one consumer per
connection). The per-consumer Open MQ window is enforced here: ``grant_credit`` puts
nothing on the wire, it releases deliveries from a per-consumer stash into the core,
so the core's counters stay true. On 3.1.1 (and for QoS 0) nothing bounds the broker:
the stash grows with what it pushes.

Parts. :class:`~.inbound.Inbound` owns receiving, :class:`~.outbound.Outbound`
sending, :class:`~.subscriptions.MqttSubscriptions` subscribing (with
:class:`~.subacks.Subacks`, which hands each SUBACK from paho's thread to the subscriber
waiting for it) and :class:`~.failover.Failover` what a drop does (``imqReconnectEnabled``:
reconnecting along the address list); each reaches the transport through a small
Protocol.

Threading. paho calls back on its network thread; there we only convert packets and hand
them to ``TransportListener.on_delivery`` (which buffers). User code never runs there,
so a slow listener does not stop PINGREQs (keepalive) or acks. A PUBACK, and a QoS 1
PUBLISH made while no other awaits its PUBACK, is written by the thread that makes it;
PUBLISHes made while others are in flight are written by paho's thread, joined
(paho_client.py says which steps of paho's client are jmspy's).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlsplit

from jmspy import errors
from jmspy.capabilities import Feature, RefusedFeatureException
from jmspy.destinations import Destination, Queue
from jmspy.logs import transport_logger
from jmspy.message import Message
from jmspy.reconnect import ReconnectPolicy, connect_first
from jmspy.tls import TlsSettings
from jmspy.tls_errors import diagnose, explain
from jmspy.transport import (
    ConsumerSpec,
    Credentials,
    RemoteConsumer,
    TransportListener,
)

from ..broker_errors import for_user
from ..capabilities import native_features, refusal, require
from . import lent_reading
from .disconnect import disconnect_reason
from .failover import Failover
from .identify import broker_version
from .inbound import Inbound
from .mapping import check_v311, options_detail, unsupported_in_message
from .outbound import Done, Outbound
from .paho_client import connect_options, new_client
from .subscriptions import MqttSubscriptions
from .url_options import URL_OPTIONS, list_options

_paho: Any
try:
    import paho.mqtt.client as _paho_client

    _paho = _paho_client
except ImportError:  # pragma: no cover - exercised by the packaging test
    _paho = None

__all__ = ["MqttTransport"]

log = transport_logger("mqtt")

_SECURITY_REASONS = ("bad user name or password", "not authorized", "banned",
                     "bad authentication method")


class MqttTransport:
    """The Transport interface over one paho-mqtt client."""

    scheme = "mqtt"
    #: It connects along an address list (imqAddressList) and moves along it on a drop.
    address_lists = True
    #: The query options each scheme's URLs take (checked when the factory is made).
    url_options = URL_OPTIONS
    capabilities: frozenset[Feature] = frozenset()  # set per connection from the matrix
    in_process = False

    def __init__(self, url: SplitResult, properties: Mapping[str, Any]) -> None:
        if _paho is None:
            raise errors.InvalidConfigurationException(
                "the mqtt:// transport needs the paho-mqtt package: pip install 'jmspy[mqtt]'"
            )
        listed = properties.get("imqAddressList")
        urls = [urlsplit(address) for address in listed.split(",")] if listed else [url]
        query = list_options(urls)
        # The options of the query string are the first URL's, for all; the TLS options
        # are each URL's own. _tls: each address's TLS settings (mqtts://, mqtt+ssl://;
        # None: plain text), from its URL's TLS options over the factory's ssl* properties.
        self._tls = [TlsSettings.resolve(u.scheme, dict(parse_qsl(u.query)), properties)
                     for u in urls]
        #: (host, port) of each broker of the address list (one: the URL)
        self._addresses = [(u.hostname or "127.0.0.1", u.port or (
            1883 if tls is None else 8883)) for u, tls in zip(urls, self._tls, strict=True)]
        self.tls: TlsSettings | None = None
        self._use(0)
        self.requested_version = version = query["version"]
        self.version = "5" if version != "3.1.1" else "3.1.1"
        self.keepalive: int = query["keepalive"]
        self.connect_timeout: float = query["connect_timeout"]
        self.sync_send: bool = query["sync_send"]
        self.send_window: int = query["send_window"]
        self.outbound = Outbound(self, self.send_window)
        self.queue_selectors_discard = query["queue_selectors"] == "discard"
        self.session_expiry: int = query["session_expiry"]
        self.receive_maximum_source = source = (
            "imqConnectionFlowLimit" if properties.get("imqConnectionFlowLimitEnabled")
            else "imqConsumerFlowLimit")
        self.receive_maximum = min(65535, max(1, int(properties.get(source, 1000))))
        self.server = ""  # the broker's $SYS/broker/version, once identify() asked
        self._persistent_session = False
        self._client: Any = None
        self._listener: TransportListener | None = None
        self._lock = threading.RLock()
        self.inbound = Inbound(self, self._lock)
        self.subscriptions = MqttSubscriptions(self, self.inbound, self._lock)
        self._closing = False
        self._connected = threading.Event()
        self._connack: tuple[Any, bool] | None = None
        self._opened = False
        self.reconnect = ReconnectPolicy.from_properties(properties)
        self._failover = Failover(self)
        #: sendTimeout (ms): how long a QoS 1 send waits for its PUBACK (0: 30 s)
        self.send_timeout_ms = int(properties.get("sendTimeout", 30_000))
        #: the broker's Maximum Packet Size (its MQTT 5 CONNACK; None: unlimited)
        self.max_packet_size: int | None = None
        self._credentials = Credentials()
        self._settled = threading.Event()  # connected, or given up: waiting calls wake
        self._lost: str | None = None

    def _use(self, index: int) -> None:
        """Connect to address ``index`` of the list from now on."""
        self.host, self.port = self._addresses[index]
        self.tls = self._tls[index]
        self.scheme = "mqtt" if self.tls is None else "mqtts"  # conn.where says which

    # -- what Inbound and Outbound ask ------------------------------------------------------
    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    #: Receive Maximum carries imqConnectionFlowLimit, but Mosquitto 2.0 overshoots it
    broker_connection_flow = False  # once PUBACKs flow: the client keeps its own cap
    release_flow = None

    @property
    def listener(self) -> TransportListener | None:
        return self._listener

    @property
    def paho(self) -> Any:
        return self._client

    @property
    def persistent_session(self) -> bool:
        """A client id was given: the broker keeps the session (and what it holds)."""
        return self._persistent_session

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def address_count(self) -> int:
        return len(self._addresses)

    def describe(self) -> str:
        return f"MQTT {self.version} broker at {self.where}"

    def identify(self) -> str:
        """The broker's name and version, asked once (identify.py): "" if it has none."""
        if not self.server:
            self.server = broker_version(self.client(), self.subscriptions.wait_ack,
                                         self.connect_timeout)
        return self.server

    def require(self, feature: Feature, detail: str = "") -> None:
        """Raise the capability matrix's refusal when this protocol version cannot carry
        ``feature`` (MQTT cannot name its server, so the column is the version)."""
        require("mqtt", self.version, feature, detail=detail, where=f"broker at {self.where}")

    def refusal(self, feature: Feature, detail: str = "") -> RefusedFeatureException:
        """The matrix's error for a feature this transport has no implementation of."""
        return refusal("mqtt", self.version, feature, detail=detail,
                       where=f"broker at {self.where}")

    # -- connection -----------------------------------------------------------------------
    def open(self, listener: TransportListener, credentials: Credentials) -> None:
        self._listener = listener
        self._credentials = credentials
        client_id, user, password = credentials.client_id, credentials.user, credentials.password
        self._persistent_session = client_id is not None

        def open_at(index: int) -> None:
            self._use(index)
            versions = {"auto": ["5", "3.1.1"], "5": ["5"], "3.1.1": ["3.1.1"]}
            for version in versions[self.requested_version]:
                if self._try_connect(version, client_id, user, password):
                    self.version = version
                    break

        connect_first(self.reconnect, [f"{'mqtt' if t is None else 'mqtts'}://{h}:{p}"
                                       for (h, p), t in zip(self._addresses, self._tls,
                                                            strict=True)],
                      open_at)
        caps = native_features("mqtt", self.version)
        if not self.persistent_session:  # a durable subscription needs a client id
            caps -= {Feature.DURABLE_SUBSCRIPTIONS}
        self.capabilities = caps
        self._settled.set()

    def _try_connect(
        self, version: str, client_id: str | None, user: str | None, password: str | None
    ) -> bool:
        assert _paho is not None
        v5 = version == "5"
        client = new_client(_paho, version, client_id)  # paho, with jmspy's steps
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self.outbound.quick_ack.wrap(self.inbound.on_message)
        client.on_publish = self.outbound.on_publish
        client.on_subscribe = client.on_unsubscribe = self.subscriptions.on_suback
        # paho's own in-flight cap makes it scan every outstanding message on each PUBACK
        # (its _update_inflight). jmspy bounds what it has in flight itself (one per
        # synchronous send, send_window asynchronous ones), so the cap stays only for
        # sync_send=false, where it is what bounds the pipelined sends.
        client.max_inflight_messages_set(0 if self.sync_send else self.send_window)
        if user is not None:
            client.username_pw_set(user, password)
        self._connected.clear()
        self._connack = None
        connect_kwargs = connect_options(version, client_id, self.receive_maximum,
                                         self.session_expiry)
        client.connect_timeout = self.connect_timeout  # paho's, for TCP and the handshake
        if self.tls is not None:
            # a context per connect: a renewed certificate file is read again. paho's
            # raw-socket fast paths (buffered_read, direct_write) see an SSLSocket and
            # step aside: paho reads and writes it itself.
            client.tls_set_context(self.tls.context(self.where))
        self._client = client
        try:
            client.connect(self.host, self.port, self.keepalive, **connect_kwargs)
        except OSError as exc:
            self._client = None
            if self.tls is not None:
                failure = explain(exc, self.where, timeout=self.connect_timeout)
                if failure is not None:
                    raise failure from None  # the ssl traceback says nothing more
            raise errors.JMSException(
                f"cannot connect to an MQTT broker at {self.where} ({exc}): check that the "
                "broker is running and has an MQTT listener on that host and port"
            ) from exc
        client.loop_start()
        if not self._connected.wait(self.connect_timeout):
            self._drop_client(client)
            if self.tls is not None:  # silent after the handshake: a refused certificate?
                self._raise_tls_failure()
            raise errors.JMSException(
                f"no CONNACK from the MQTT broker at {self.where} within "
                f"{self.connect_timeout:.0f}s"
            )
        reason, ok = self._connack or (None, False)
        if ok:
            self._opened = True
            log.debug("connected to %s (MQTT %s, user %s)", self.where, version,
                      user or "none given")
            return True
        self._drop_client(client)
        if reason is None and self.tls is not None:  # closed before CONNACK: refused
            self._raise_tls_failure()  # the client's certificate, or not a TLS port?
        text = str(reason) if reason is not None else "closed the connection"
        if (
            v5
            and self.requested_version == "auto"
            and (reason is None or "protocol version" in text.lower())
        ):
            return False  # a 3.1.1-only broker: try again with 3.1.1
        if any(word in text.lower() for word in _SECURITY_REASONS):
            raise errors.JMSSecurityException(
                f"the MQTT broker at {self.where} refused the login{for_user(user, text)}: "
                f"{text}; check the user name and password"
            )
        if reason is None:  # closed at once: a TLS listener spoken to in plain text?
            self._raise_tls_failure()
        raise errors.JMSException(
            f"the MQTT {version} broker at {self.where} refused the connection: {text}"
        )

    def _raise_tls_failure(self) -> None:
        """The connection closed (or went silent) before CONNACK: raise the TLSException
        that says why, if TLS is why (:func:`jmspy.tls_errors.diagnose`)."""
        tls = self.tls
        context = None if tls is None else tls.context(self.where, warn=False)
        failure = diagnose(self.host, self.port, context, timeout=self.connect_timeout,
                           family="mqtt")
        if failure is not None:
            raise failure

    def _drop_client(self, client: Any) -> None:
        self._client = None
        try:
            client.disconnect()
        except Exception:
            pass
        client.loop_stop()

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        self._connack = (reason, not reason.is_failure)
        self.max_packet_size = getattr(props, "MaximumPacketSize", None)
        self._connected.set()

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        if client is not self._client:
            return  # a client we already replaced
        if not self._opened:
            if self._connack is None:  # closed before CONNACK (a v5 CONNECT to a 3.1.1 broker)
                self._connack = (None, False)
            self._connected.set()
            return
        if not self._closing:
            self._failover.connection_lost(client, disconnect_reason(reason, props))

    # -- what Failover steers -------------------------------------------------------------
    def connection_dropped(self, reason: str) -> None:
        self.outbound.dropped(reason)  # a synchronous send waiting for its PUBACK fails
        with self._lock:
            self._settled.clear()
            self._opened = False
            self.inbound.connection_lost()
        self.outbound.fail_all(f"the connection to {self.where} dropped ({reason})",
                               parked=False)  # never written: the reconnect writes them

    def settle(self, lost: str | None) -> None:
        if lost is not None:
            self._lost = lost
            self._client = None
        self._settled.set()
        if lost is None:
            self.outbound.resume()  # sends parked during the reconnect
        else:
            self.outbound.fail_all(lost)

    @property
    def reconnecting(self) -> bool:
        """(Outbound's host.) Down, and a reconnect under way: a send would wait."""
        return not self._settled.is_set() and not self._closing and self._lost is None

    def discard_client(self) -> None:
        client = self._client
        if client is not None:
            self._drop_client(client)

    def connect_again(self, address: int) -> None:
        self._use(address)
        c = self._credentials
        client_id, user, password = c.client_id, c.user, c.password
        try:
            connected = self._try_connect(self.version, client_id, user, password)
            if connected:
                self.subscriptions.subscribe_again()
        except errors.JMSSecurityException:
            raise
        except errors.JMSException:
            client = self._client
            self._opened = False
            if client is not None:
                self._drop_client(client)
            raise
        if not connected:
            raise errors.JMSException("the broker refused the protocol version")

    def close(self) -> None:
        self._closing = True
        self._settled.set()  # release calls waiting for a reconnect
        client = self._client
        if client is None:
            return
        last = self.outbound.last_publish
        if last is not None:
            # sync_send=false: paho may still hold queued PUBLISHes that a DISCONNECT
            # would overtake; they leave (and are acknowledged) in order, so wait for the last.
            try:
                last.wait_for_publish(30.0)
            except (RuntimeError, ValueError):
                pass
        try:
            client.disconnect()
        finally:
            client.loop_stop()
            self._client = None
            self.outbound.fail_all("the connection was closed first")

    def need_reader(self) -> None:
        """(Outbound's host.) A thread waits for a packet: an event loop holding the
        reading gives it back to paho's thread (:mod:`.lent_reading`)."""
        client = self._client
        if client is not None:
            lent_reading.need_reader(client)

    def client(self, wait: bool = True) -> Any:
        """The live paho client; during a reconnect, wait for its outcome first."""
        if wait and not self._closing:
            self._settled.wait()
        client = self._client
        if client is None or (not self._opened and wait):
            if self._lost and not self._closing:
                raise errors.JMSException(self._lost, error_code="CONNECTION_LOST")
            raise errors.IllegalStateException(f"the MQTT connection to {self.where} is closed")
        return client

    # -- consumers ------------------------------------------------------------------------
    def declare_destination(self, destination: Destination) -> None:
        """MQTT has no queue arguments or consumer options: refuse any."""
        if destination.options:
            self.require(Feature.DESTINATION_OPTIONS, options_detail(destination))

    def create_consumer(self, spec: ConsumerSpec) -> RemoteConsumer:
        return self.subscriptions.create_consumer(spec)

    def close_consumer(self, consumer_id: int) -> None:
        self.subscriptions.close_consumer(consumer_id)

    # -- receiving: Inbound ---------------------------------------------------------------
    def grant_credit(self, consumer_id: int, credits: int) -> None:
        client = self._client
        try:
            self.inbound.grant_credit(consumer_id, credits)
        except errors.JMSException:
            raise
        except Exception as exc:  # (no wire traffic of its own; a PUBACK of a QoS 0 copy)
            raise self._io_error(client, exc, "granting credit") from exc

    def revoke_credit(self, consumer_id: int) -> int:
        return self.inbound.revoke_credit(consumer_id)

    def ack(self, delivery_tags: list[int], tx: str | None = None) -> None:
        client = self._client
        try:
            self.inbound.ack(delivery_tags, tx)
        except errors.JMSException:
            raise
        except Exception as exc:  # an OSError or paho's own, from writing the PUBACKs
            raise self._io_error(client, exc, "acknowledging") from exc

    def try_ack(self, delivery_tags: list[int]) -> bool:
        """Never declines: PUBACKs go out on paho's socket (see ``Transport.try_ack``)."""
        self.ack(delivery_tags, None)
        return True

    def io_failed(self, error: BaseException) -> None:
        """An error escaped a call on this connection's I/O path (the core caught it on a
        dispatcher thread): the connection is lost; paho's network thread reads the end
        of the shut socket and reports it (``_on_disconnect`` reconnects)."""
        self._lose(self._client)

    def _lose(self, client: Any) -> None:
        if client is None or client is not self._client:
            return
        try:
            sock = client.socket()
        except Exception:
            sock = None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed already: paho has seen the end

    def _io_error(self, client: Any, exc: Exception, doing: str) -> errors.JMSException:
        self._lose(client)
        return errors.JMSException(
            f"{doing} on the MQTT connection to {self.where} failed "
            f"({type(exc).__name__}: {exc}); the connection is lost: with a client id the "
            "broker redelivers what was not acknowledged, flagged DUP",
            error_code="CONNECTION_INTERRUPTED")

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True) -> None:
        self.inbound.cancel(delivery_tags, redelivered=redelivered)

    # -- sending --------------------------------------------------------------------------
    def send_async(self, message: Message, tx: str | None, done: Done) -> None:
        """JMS 2 asynchronous send with up to ``send_window`` PUBLISHes in flight;
        ``done`` hears the outcome in send order (mqtt/outbound.py). Errors found before
        the PUBLISH (refused features, a lost connection) are raised here."""
        self.send(message, tx, done)

    def send(self, message: Message, tx: str | None = None, done: Done | None = None) -> None:
        client = self._client
        try:
            self._send(message, tx, done)
        except errors.JMSException:
            raise
        except Exception as exc:  # an OSError or paho's own, from writing the PUBLISH
            raise self._io_error(client, exc, "sending") from exc

    def _send(self, message: Message, tx: str | None, done: Done | None) -> None:
        if tx is not None:
            raise self.refusal(Feature.TRANSACTIONS)
        assert message.destination is not None
        problem = unsupported_in_message(message)
        if problem is None and self.version != "5":  # v5 carries the rest
            problem = check_v311(message)
        if problem is not None:
            self.require(*problem)
        if done is not None:
            self.outbound.publish_async(message, done)
            return
        self.outbound.send(message)

    # -- refused / not applicable ---------------------------------------------------------
    def begin(self, tx: str) -> None:
        raise self.refusal(Feature.TRANSACTIONS, "transactions (SESSION_TRANSACTED)")

    def commit(self, tx: str) -> None:
        raise self.refusal(Feature.TRANSACTIONS)

    def rollback(self, tx: str) -> None:
        raise self.refusal(Feature.TRANSACTIONS)

    def browse(self, queue: Queue, selector: str | None) -> list[Message]:
        raise self.refusal(Feature.BROWSER, "queue browsing")

    def unsubscribe(self, name: str) -> None:
        self.subscriptions.unsubscribe(name)

    def create_temporary_queue(self) -> str:
        raise self.refusal(Feature.TEMPORARY_QUEUES)

    def delete_temporary_queue(self, name: str) -> None:
        raise self.refusal(Feature.TEMPORARY_QUEUES)

    def destination_stats(self, destination: Destination) -> dict[str, Any]:
        raise self.refusal(Feature.DESTINATION_STATS)

    def lend(self, delivery_tags: list[int], token: str, ttl_ms: int | None) -> None:
        raise self.refusal(Feature.READING_LEASES)

    def settle_leases(self, tokens: list[str], *, release: bool = False) -> int:
        raise self.refusal(Feature.READING_LEASES)

    # -- introspection --------------------------------------------------------------------
    def flow_state(self) -> dict[str, Any]:
        """Connection-level counters: Receive Maximum and what the broker has in flight."""
        return {
            "version": self.version,
            "receive_maximum": self.receive_maximum if self.version == "5" else None,
            "receive_maximum_source": self.receive_maximum_source,
            **self.inbound.flow_counters(),
        }

    def consumer_state(self, consumer_id: int) -> dict[str, int]:
        return self.inbound.consumer_state(consumer_id)
