"""The one interface between the jmspy core and a transport, and the scheme registry.

The core (connections, sessions, flow accounting) never sees protocol bytes; a transport
never sees sessions or listeners. A transport is a thin adapter that maps this interface
onto what its protocol offers: ``vm`` onto the in-process broker core, ``stomp`` onto
stomp.py, ``mqtt`` onto paho-mqtt. Third parties add schemes through the
``jmspy.transports`` entry-point group.

Threading contract: a transport may call :class:`TransportListener` methods from any
thread (its I/O thread, or the caller's thread for ``vm``) and possibly while it holds its
own locks. The listener therefore only buffers and signals; it never calls back into the
transport from inside those calls.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol
from urllib.parse import SplitResult, urlsplit

from .address_list import resolve as resolve_addresses
from .capabilities import Feature
from .destinations import Destination, Queue
from .errors import InvalidConfigurationException, JMSException, UnknownTransportException
from .message import Message
from .tls import check_addresses as check_tls_addresses
from .url_options import parse_addresses

__all__ = [
    "ConsumerSpec",
    "RemoteConsumer",
    "Transport",
    "TransportFactory",
    "TransportListener",
    "check_url_options",
    "create_transport",
    "known_schemes",
    "on_event_loop",
    "register_transport",
]


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    """Everything a transport needs to subscribe one consumer."""

    consumer_id: int
    destination: Destination
    selector: str | None = None
    no_local: bool = False
    subscription_name: str | None = None
    durable: bool = False
    shared: bool = False
    auto_ack: bool = False  # NO_ACKNOWLEDGE: the broker forgets a message once delivered
    flow_limit: int = 1000  # the client's effective window, for protocols that carry it
    flow_threshold: int = 50


@dataclass(frozen=True, slots=True)
class RemoteConsumer:
    """The transport's answer to a subscribe: the destination's own flow limit, if any."""

    destination_flow_limit: int | None = None


class TransportListener(Protocol):
    """Implemented by the connection; called by the transport (see module docstring)."""

    def on_delivery(
        self, consumer_id: int, delivery_tag: int, message: Message, delivery_count: int
    ) -> None:
        """A message arrived for a consumer. ``message`` is read-only and ours to keep."""

    def on_deliveries(self, consumer_id: int, first_tag: int, messages: list[Message]) -> None:
        """A run of messages arrived for one consumer, with delivery tags ``first_tag``,
        ``first_tag + 1``...; each already has its ``_delivery_tag``, ``delivery_count``
        and ``redelivered`` set. Same as ``on_delivery`` for each, in one call."""

    def credit(self, consumer_id: int) -> int:
        """The credit the consumer's flow accounting has granted and no delivery has used
        yet: how many deliveries the transport may hand over now (0 for an unknown or
        closed consumer). The consumer's accounting is the one owner of this number; a
        transport whose broker pushes beyond it (a prefetch, or none) stashes the surplus
        and asks here how much of the stash may go, instead of counting credit itself.
        Called with the transport's lock held; takes no lock (one read per hand-over)."""

    def on_transport_error(self, error: JMSException) -> None:
        """The broker reported an asynchronous error (the connection is still up)."""

    def on_connection_interrupted(self, error: JMSException) -> None:
        """The connection to the broker dropped (``error.error_code`` is
        "CONNECTION_INTERRUPTED" while the transport reconnects, "CONNECTION_LOST" when it
        will not, or gave up; it may be called twice: first one, then the other).

        Every delivery tag handed out so far is dead from here on: the broker redelivers
        those messages (marked redelivered) and ``ack``/``cancel`` of them must be a no-op.
        Delivery tags must therefore keep increasing across a reconnect: the core treats
        every tag up to the last one it was given before this call as dead. Outstanding
        credit is gone too: the core's accounting revokes it (the transport keeps none).
        """

    def on_connection_resumed(self) -> None:
        """The transport reconnected and re-created every open consumer's subscription
        (from its ConsumerSpec). Called from the transport's reconnect thread, with no
        transport lock held: the core re-grants credit (``grant_credit``) from here.
        """


@dataclass(frozen=True, slots=True)
class Credentials:
    """Who a connection is: its JMS client id (None: none) and login (None: anonymous).
    Kept by a transport to log in again when it reconnects."""

    client_id: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)


#: ``send_async(message, tx, done)``: see :attr:`Transport.send_async`.
SendAsync = Callable[[Message, str | None, Callable[[Exception | None], None]], None]


def on_event_loop() -> bool:
    """The calling thread is running an asyncio event loop: a transport's ``send_async``
    must not wait on it for room (it parks the send instead, see
    :attr:`Transport.send_async`). asyncio is not imported for the question: where no
    module imported it, no loop can be running."""
    aio = sys.modules.get("asyncio")
    if aio is None:
        return False
    try:
        aio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Transport(Protocol):
    """What a transport does for the core. Every method may raise JMSException.

    An I/O error (an OSError, a protocol library's own exception) is the transport's to
    turn into a JMSException (``error_code`` CONNECTION_INTERRUPTED: the connection is
    lost). Should one escape a call made on a session's dispatcher thread anyway, the
    core calls the transport's optional ``io_failed(error)`` -- "treat the connection as
    lost" -- so its reconnect machinery runs; the thread itself always lives on.

    Optional: ``declare_destination(destination)`` checks a destination's options
    (``orders?x-queue-type=quorum``) against the broker and applies what the broker takes
    from clients; the session refuses every option on a transport without it.
    """

    scheme: str
    #: The capability matrix's features this transport carries natively on the broker it
    #: is connected to (jmspy.transports.capabilities; set when the connection opens).
    capabilities: frozenset[Feature]
    #: The broker runs in this process: acknowledgements cannot be lost apart from it, so
    #: AUTO_ACKNOWLEDGE may group them without widening JMS's duplicate window.
    in_process: bool

    @property
    def broker_connection_flow(self) -> bool:
        """The broker enforces imqConnectionFlowLimit itself (it said so when connecting):
        the client caps nothing more, so the two never share the capacity out
        differently."""

    @property
    def release_flow(self) -> Callable[[int], None] | None:
        """Where the broker gates imqConnectionFlowLimit on what the client consumed
        (vm://): told the number of messages each time some leave the client's buffers
        (consumed, or handed back). None where the broker needs no telling (it counts
        acknowledgements, or the client caps by itself)."""

    @property
    def where(self) -> str:
        """What the transport talks to now, for messages ("host:port", "vm://name"):
        with an address list, the broker of the list it is connected to."""

    @property
    def send_async(self) -> SendAsync | None:
        """Keeps several sends in flight and calls ``done(error or None)`` for each, in
        send order, on the transport's own thread; None where the transport has no such
        path (the connection then sends asynchronously on its notifier thread).

        What bounds the sends in flight (a window, a cap) may make the caller wait for
        room, except on a thread running an event loop (:func:`on_event_loop`): there the
        send is *parked* and written, in order, when room comes, so an awaited send (or a
        ``gather`` of thousands) never stops the loop; what the parked sends hold is what
        the application holds already, its messages and their futures."""

    def open(self, listener: TransportListener, credentials: Credentials) -> None:
        """Connect as ``credentials`` say; deliveries and connection events go to
        ``listener``. Raises JMSException (JMSSecurityException for a refused login)."""

    def close(self) -> None: ...

    def create_consumer(self, spec: ConsumerSpec) -> RemoteConsumer: ...

    def close_consumer(self, consumer_id: int) -> None: ...

    def grant_credit(self, consumer_id: int, credits: int) -> None:
        """Let the broker send ``credits`` more messages to the consumer (the core's
        accounting has already counted them: :meth:`TransportListener.credit`)."""

    def revoke_credit(self, consumer_id: int) -> int:
        """Take back unused credit (a pull that timed out, a hand-back); returns how many
        came back, which the core then revokes from its accounting. A transport that
        cannot take credit back from its broker returns all of it
        (:meth:`TransportListener.credit`) and hands nothing over until the next grant."""

    def send(self, message: Message, tx: str | None = None) -> None:
        """Send a message whose headers (destination, id, timestamp...) are all set.

        During a reconnect this blocks until the transport is back (then sends) or gives
        up (then raises a JMSException naming host:port)."""

    def ack(self, delivery_tags: list[int], tx: str | None = None) -> None: ...

    def try_ack(self, delivery_tags: list[int]) -> bool:
        """Acknowledge outside a transaction if that needs no wait for another thread;
        False: nothing was sent (the caller keeps the tags and acknowledges later).

        Only an in-process broker can answer False: its lock may be held by a producer in
        the middle of a send, and a listener thread that blocked on it there would hand
        the GIL and the lock back and forth with that producer for every batch of
        acknowledgements (``SessionDispatcher`` says what it does instead). Over a
        socket this is :meth:`ack`."""

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True) -> None:
        """Hand unacknowledged deliveries back for redelivery, in delivery order."""

    def lend(self, delivery_tags: list[int], token: str, ttl_ms: int | None) -> None:
        """Lend deliveries to the reading lease ``token`` (``Session.lend_messages``).
        Called only where :attr:`capabilities` has ``Feature.READING_LEASES``; others
        raise the matrix's refusal."""

    def settle_leases(self, tokens: list[str], *, release: bool = False) -> int:
        """Consume (or, with ``release``, redeliver) what ``tokens`` hold; how many."""

    def begin(self, tx: str) -> None: ...

    def commit(self, tx: str) -> None: ...

    def rollback(self, tx: str) -> None: ...

    def browse(self, queue: Queue, selector: str | None) -> list[Message]: ...

    def unsubscribe(self, name: str) -> None: ...

    def create_temporary_queue(self) -> str: ...

    def delete_temporary_queue(self, name: str) -> None: ...

    def destination_stats(self, destination: Destination) -> dict[str, Any]:
        """Broker-side counters of a destination (messageCount, deliveringCount...)."""


TransportFactory = Callable[[SplitResult, Mapping[str, Any]], Transport]

_BUILTIN: dict[str, str] = {
    "vm": "jmspy.transports.vm:VmTransport",
    "stomp": "jmspy.transports.stomp.transport:StompTransport",
    "mqtt": "jmspy.transports.mqtt.transport:MqttTransport",
    # the same transports over TLS (jmspy/tls.py): the URL's scheme tells them
    "stomp+ssl": "jmspy.transports.stomp.transport:StompTransport",
    "stomps": "jmspy.transports.stomp.transport:StompTransport",
    "mqtts": "jmspy.transports.mqtt.transport:MqttTransport",
    "mqtt+ssl": "jmspy.transports.mqtt.transport:MqttTransport",
}
_REGISTERED: dict[str, TransportFactory] = {}


def register_transport(scheme: str, factory: TransportFactory) -> None:
    """Make ``scheme://`` URLs use ``factory`` (for tests and plug-ins without packaging)."""
    _REGISTERED[scheme.lower()] = factory


def _load(ref: str) -> TransportFactory:
    module, _, attr = ref.partition(":")
    obj: TransportFactory = getattr(importlib.import_module(module), attr)
    return obj


def _entry_point_refs() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group="jmspy.transports")}


def known_schemes() -> list[str]:
    return sorted({*_BUILTIN, *_REGISTERED, *_entry_point_refs()})


def _factory(scheme: str) -> TransportFactory | None:
    factory = _REGISTERED.get(scheme)
    if factory is None:
        ref = _BUILTIN.get(scheme) or _entry_point_refs().get(scheme)
        factory = _load(ref) if ref is not None else None
    return factory


def check_url_options(url: str | None, properties: Mapping[str, Any]) -> None:
    """Refuse a URL query option its transport does not read, or a value it does not take,
    for every address of ``url`` (or ``imqAddressList``): what ConnectionFactory does when
    it is made, so a misspelt option fails there, long before any socket.

    A transport declares its options as ``url_options`` on its factory: a mapping from
    scheme to :class:`jmspy.url_options.OptionTable` (a transport without one checks its
    own URLs). A URL this cannot place -- no scheme, an unknown scheme, a malformed list --
    is left to :func:`create_transport`, which says what is wrong with it; the transports
    read their options through the same tables, so a URL set later is checked there."""
    if url is not None and (not isinstance(url, str) or "://" not in url):
        return
    try:
        addresses = resolve_addresses(url, properties)
    except InvalidConfigurationException:
        return  # create_connection() says what is wrong with the list
    urls = [urlsplit(address) for address in addresses]
    scheme = urls[0].scheme.lower()  # one transport for all: resolve_addresses checked
    tables = getattr(_factory(scheme), "url_options", None)
    if isinstance(tables, Mapping) and all(u.scheme.lower() in tables for u in urls):
        parse_addresses(tables, urls)


def create_transport(url: str | None, properties: Mapping[str, Any]) -> Transport:
    """Build the transport for ``url`` (``vm://embedded``, ``stomp://host:port``...), or
    for an address list (``url`` or ``imqAddressList``: comma-separated URLs of one
    scheme, jmspy/address_list.py). The factory is given the first address and, in
    ``properties["imqAddressList"]``, the whole list; a transport that can move between
    brokers says so with a true ``address_lists`` attribute, and a list of more than one
    address for any other is refused."""
    if url is not None and (not isinstance(url, str) or "://" not in url):
        raise UnknownTransportException(
            f"connection URL {url!r} has no scheme; write it like 'vm://embedded' or "
            "'stomp://127.0.0.1:61613'"
        )
    addresses = resolve_addresses(url, properties)
    check_tls_addresses([urlsplit(address).scheme for address in addresses], properties)
    url = addresses[0]
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    factory = _factory(scheme)
    if factory is None:
        raise UnknownTransportException(
            f"no transport for URL scheme {scheme!r} in {url!r}; known schemes: "
            f"{', '.join(known_schemes())}. Install the package that provides it or "
            "register one with jmspy.transport.register_transport()"
        )
    if len(addresses) > 1 and not getattr(factory, "address_lists", False):
        raise UnknownTransportException(
            f"the {scheme}:// transport connects to one broker, so it cannot take the "
            f"address list {','.join(addresses)!r}; address lists work with stomp:// and "
            "mqtt://"
        )
    return factory(parts, {**properties, "imqAddressList": ",".join(addresses)})
