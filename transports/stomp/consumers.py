"""The consumers of one ``stomp://`` connection: their SUBSCRIBEs, the credit the core
grants them, and the MESSAGE frames the broker sends them.

Each consumer is a :class:`~.subscription.StompSubscription` (its SUBSCRIBE headers,
unacknowledged ack ids and *stash*); this object keeps them by consumer id and by
subscription id, subscribes them again after a reconnect, and turns each MESSAGE into a
delivery for the core, as the consumer's credit allows (the flow control the transport's
module docstring describes). That credit is counted once, by the core's flow accounting
(``TransportListener.credit``): this object asks, it keeps no count of its own.
Hand-backs are :class:`~.redelivery.Redelivery`'s. Every call is made with the
transport's lock held, or takes it.
"""

from __future__ import annotations

import functools
import threading
import uuid
from typing import Any, Protocol

from jmspy import errors
from jmspy.capabilities import Feature
from jmspy.logs import transport_logger
from jmspy.message import Message, selector_getter
from jmspy.transport import ConsumerSpec, RemoteConsumer, TransportListener
from jmspy.wire.headers import NACK_MORE, NACK_UNSEEN, SEEN_THROUGH

from .admin import StompAdmin
from .connect import ConnectOptions
from .deliveries import Deliveries
from .mapping import BrokerProfile, jms_message_id, subscribe_destination
from .receipts import Receipts
from .received import from_frame
from .redelivery import Redelivery
from .subscription import StompSubscription

__all__ = ["ConsumersHost", "StompConsumers"]

log = transport_logger("stomp")



class ConsumersHost(Protocol):
    """What :class:`StompConsumers` asks of the transport."""

    @property
    def profile(self) -> BrokerProfile: ...

    @property
    def options(self) -> ConnectOptions: ...

    @property
    def version(self) -> str: ...

    @property
    def where(self) -> str: ...

    @property
    def listener(self) -> TransportListener | None: ...

    @property
    def live(self) -> Any:
        """The stomp.py connection in use, or None while down or closed."""

    def connection(self, wait: bool = True) -> Any: ...

    def require(self, feature: Feature, detail: str = "") -> None: ...

    def write_failed(self, conn: Any, exc: Exception, doing: str) -> errors.JMSException:
        """The connection is lost: the JMSException that says so."""

    def report(self, error: errors.JMSException) -> None: ...


class StompConsumers:
    """The subscriptions of one connection, and what they receive."""

    def __init__(self, host: ConsumersHost, lock: threading.RLock, deliveries: Deliveries,
                 receipts: Receipts, admin: StompAdmin) -> None:
        self._host = host
        self._lock = lock
        self._deliveries = deliveries
        self._receipts = receipts
        self._admin = admin
        self._subs: dict[int, StompSubscription] = {}
        self._by_sid: dict[str, StompSubscription] = {}
        self._redelivery = Redelivery(self, deliveries)

    @property
    def profile(self) -> BrokerProfile:
        return self._host.profile

    def connection_lost(self) -> None:
        """(Lock held.) Every tag of the dropped connection is dead; credit is gone with
        it."""
        for sub in self._subs.values():
            sub.connection_lost()
        self._deliveries.connection_lost()
        self._by_sid.clear()

    def subscribe_again(self) -> None:
        """(Lock held.) SUBSCRIBE every consumer on the new connection, same ids."""
        for sub in list(self._subs.values()):
            self._subscribe(sub, same_id=True)

    def create_consumer(self, spec: ConsumerSpec) -> RemoteConsumer:
        sub = self._subscription(spec)
        # The SUBSCRIBE asks for a RECEIPT and create_consumer waits for it: once it
        # returns, the broker has the subscription, so a message published after that (from
        # any connection) reaches this topic consumer, and a refused SUBSCRIBE fails here.
        receipt, event = self._receipts.expect(keep_answer=True)
        conn = self._host.live
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
        host = self._host
        return StompSubscription.for_spec(
            spec, host.profile, host.require, self._admin.durable_queue,
            discard_queue_selectors=host.options.queue_selectors_discard)

    def _subscribe(self, sub: StompSubscription, *, same_id: bool = False,
                   receipt: str = "") -> None:
        host = self._host
        profile = host.profile
        if not same_id:
            sub.sub_id = f"{sub.spec.consumer_id}-{uuid.uuid4().hex[:6]}"
        if sub.copies:  # a new subscription (after a reconnect): the old copies are dead
            sub.copies.clear()
        if sub.spec.durable and profile.family == "RabbitMQ":
            assert sub.spec.subscription_name is not None
            sub.sub_id = sub.spec.subscription_name
        self._by_sid[sub.sub_id] = sub
        headers = dict(sub.headers)
        if receipt:
            headers["receipt"] = receipt
        destination = subscribe_destination(sub.spec.destination, profile)
        log.debug("SUBSCRIBE %s id=%s on %s%s", destination, sub.sub_id, host.where,
                  " (again, after a reconnect)" if same_id else "")
        host.connection(wait=False).subscribe(
            destination, id=sub.sub_id, ack="client-individual", headers=headers)

    def _unsubscribe(self, sub: StompSubscription, headers: dict[str, str] | None = None
                     ) -> None:
        # No ``durable`` header: on RabbitMQ an UNSUBSCRIBE with ``durable:true`` deletes
        # the subscription's queue, and closing a durable consumer must keep it.
        self._by_sid.pop(sub.sub_id, None)
        self._host.connection(wait=False).unsubscribe(id=sub.sub_id, headers=headers)

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
            if self._host.live is None:  # down: the broker dropped the subscription
                self._by_sid.pop(sub.sub_id, None)  # already
                return
            try:
                profile = self._host.profile
                if profile.nack_batches:
                    # jmspy's broker returns them all at the UNSUBSCRIBE, in one step and
                    # with no window refilled meanwhile; it is told which ones the app
                    # saw, so that what was only prefetched (or still on the wire) goes
                    # back unmarked
                    seen = sub.seen_through()
                    self._unsubscribe(sub, None if seen is None else {SEEN_THROUGH: seen})
                else:
                    if profile.cancel == "nack":
                        # RabbitMQ keeps a cancelled consumer's unacked messages on the
                        # channel until it closes: hand them back explicitly first.
                        self._redelivery.nack(sub, list(sub.unacked))
                    self._unsubscribe(sub)
            except OSError:  # the socket died before stomp.py told us: so did the
                self._by_sid.pop(sub.sub_id, None)  # subscription, on the broker too
            for tag in list(sub.unacked):
                self._deliveries.forget(tag)
            sub.stash.clear()

    def grant_credit(self, consumer_id: int, credits: int) -> None:
        conn = self._host.live
        try:
            with self._lock:
                sub = self._subs.get(consumer_id)
                if sub is None:
                    return
                self._redelivery.flush(sub)
                sub.paused = False  # ``credits`` are in the core's count already
                self.release(sub)
        except errors.JMSException:
            raise
        except Exception as exc:  # a NACK or an auto-ack ACK written into a dead socket
            raise self._host.write_failed(conn, exc, "granting credit") from exc

    def revoke_credit(self, consumer_id: int) -> int:
        """Prefetch brokers cannot take credit back, so it returns to the core here and
        anything the broker still sends waits in the stash until credit is granted."""
        with self._lock:
            sub = self._subs.get(consumer_id)
            return 0 if sub is None else sub.take_credit(self.credit(sub))

    def credit(self, sub: StompSubscription) -> int:
        """(Lock held.) ``sub``'s unused credit, as the core's accounting counts it."""
        listener = self._host.listener
        return 0 if listener is None else listener.credit(sub.spec.consumer_id)

    def release(self, sub: StompSubscription) -> None:
        """(Lock held.) Hand ``sub``'s stashed deliveries to the core as credit allows."""
        if not sub.stash:
            return
        listener = self._listener_for(sub)
        if listener is None:
            return
        sub.release(functools.partial(self._hand_over, listener, sub),
                    listener.credit(sub.spec.consumer_id))

    def _listener_for(self, sub: StompSubscription) -> TransportListener | None:
        """(Lock held.) The core's listener, when ``sub``'s deliveries may be handed to it
        now: not paused, and no hand-back pending (it goes first, with the stash:
        grant_credit)."""
        if sub.paused or sub.pending_cancel:
            return None
        return self._host.listener

    def _hand_over(self, listener: TransportListener, sub: StompSubscription, tag: int,
                   message: Message, count: int) -> None:
        """(Lock held.) One delivery of ``sub`` to the core (acknowledged first on an
        ``ack:auto`` subscription: the broker forgets it as it is handed over)."""
        if sub.spec.auto_ack:
            self._send_ack(sub, tag, None)
        listener.on_delivery(sub.spec.consumer_id, tag, message, count)

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True) -> None:
        conn = self._host.live
        try:
            with self._lock:
                self._redelivery.cancel(delivery_tags, redelivered=redelivered)
        except errors.JMSException:
            raise
        except Exception as exc:
            raise self._host.write_failed(conn, exc, "handing messages back") from exc

    def one_in_flight(self) -> bool:
        """Every subscription at window 1 (or none): request/response, where the reading
        turn's polling window may grow (jmspy/idle_spin.py). A snapshot, no lock."""
        return all(sub.spec.flow_limit <= 1 for sub in tuple(self._by_sid.values()))

    def state(self, consumer_id: int) -> dict[str, int]:
        """Transport-side counters of one consumer (for tests and troubleshooting)."""
        with self._lock:
            sub = self._subs.get(consumer_id)
            return {} if sub is None else sub.state()

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
            message: Message | None = from_frame(headers, body)
            problem = ""
        except Exception as exc:  # a frame we cannot read must not kill the receiver
            message, problem = None, str(exc)
        deliveries = self._deliveries
        with self._lock:
            sub = self._by_sid.get(sid)
            if sub is None:
                # A subscription we dropped: ActiveMQ and jmspy's broker have it back
                # already (unsubscribe returns unacked messages); elsewhere (RabbitMQ)
                # hand it back explicitly.
                host = self._host
                profile = host.profile
                if (profile.cancel == "nack" and not profile.nack_batches
                        and host.live is not None and ack_id):
                    self.send_nack(ack_id, sid)
                key = jms_message_id(headers)
                if key:
                    deliveries.never_seen(key)
                return
            if sub.fence:
                key = jms_message_id(headers)
                count_key = sub.count_key(key) if key else None
                if sub.lifts_fence(count_key,
                                   headers.get("redelivered", "").lower() == "true"):
                    sub.lift_fence()  # the broker is past our NACKs: nothing older follows
                else:
                    # Sent before the broker took our NACKs back: it is younger than them
                    # in the queue, so it goes back too (to its own place) or it would
                    # overtake; the app never saw it.
                    self.send_nack(ack_id, sid, unseen=True)
                    if count_key is not None:
                        deliveries.never_seen(count_key)
                        sub.fenced.add(count_key)  # its return lifts the fence too
                    return
            if message is None:
                self._host.report(errors.MessageFormatException(
                    f"unreadable STOMP MESSAGE {headers.get('message-id')} from "
                    f"{self._host.where}: "
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
            count = deliveries.delivery_count(key, headers)
            if not sub.stash:
                # Nothing stashed before it: what release() would do, without the stash
                # round trip (once per message on a consumer that keeps up).
                listener = self._listener_for(sub)
                if listener is not None and listener.credit(sub.spec.consumer_id) > 0:
                    self._hand_over(listener, sub, tag, message, count)
                    return
            sub.stash.append((tag, message, count))
            self.release(sub)

    # -- acknowledgement of one delivery ----------------------------------------------------
    def _send_ack(self, sub: StompSubscription, tag: int, tx: str | None) -> None:
        ack_id = sub.unacked.pop(tag, None)
        self._deliveries.settle(tag)
        if sub.copies is not None:
            sub.copies.pop(tag, None)
        if ack_id is None:
            return
        host = self._host
        if host.version == "1.2":
            host.connection(wait=False).ack(ack_id, transaction=tx)
        else:
            host.connection(wait=False).ack(ack_id, sub.sub_id, transaction=tx)

    def settle_acked(self, delivery_tags: list[int]) -> list[tuple[str, str]]:
        """(Lock held) Settle ``delivery_tags`` as acknowledged: the (ack id, subscription
        id) of each ACK to write, in the order given; none for a delivery handed back
        meanwhile (ActiveMQ re-subscribe)."""
        settle = self._deliveries.settle
        out: list[tuple[str, str]] = []
        for tag in delivery_tags:
            sub = settle(tag)
            if sub is None:
                continue
            if sub.copies is not None:
                sub.copies.pop(tag, None)
            ack_id = sub.unacked.pop(tag, None)
            if ack_id is not None:
                out.append((ack_id, sub.sub_id))
        return out

    def lend_runs(self, delivery_tags: list[int]) -> list[tuple[str, str, str]]:
        """(Lock held) Settle ``delivery_tags`` here and return them as runs to lend:
        (first ack id, last ack id, subscription id), each run a stretch of one
        subscription's unacked deliveries, in delivery order, that are all lent (the
        broker lends every unacked delivery of the subscription between the two ids)."""
        deliveries = self._deliveries
        lent: dict[StompSubscription, set[int]] = {}
        for tag in delivery_tags:
            sub = deliveries.owner(tag)
            if sub is not None:  # else handed back meanwhile
                lent.setdefault(sub, set()).add(tag)
        runs: list[tuple[str, str, str]] = []
        for sub, tags in lent.items():
            first = last = ""
            for tag, ack_id in sub.unacked.items():
                if tag in tags:
                    first, last = first or ack_id, ack_id
                elif first:
                    runs.append((first, last, sub.sub_id))
                    first = last = ""
            if first:
                runs.append((first, last, sub.sub_id))
            for tag in tags:
                deliveries.settle(tag)
                sub.unacked.pop(tag, None)
        return runs

    def send_nack(self, ack_id: str, sid: str, *, more: bool = False,
                  unseen: bool = False) -> None:
        host = self._host
        extra = {NACK_MORE: "true"} if more else {}
        if unseen and host.profile.nack_batches:  # only jmspy's broker reads it
            extra[NACK_UNSEEN] = "true"
        if host.version == "1.2":
            host.connection(wait=False).nack(ack_id, **extra)
        else:
            host.connection(wait=False).nack(ack_id, sid, **extra)
