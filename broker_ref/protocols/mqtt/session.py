"""A sans-I/O MQTT 3.1.1/5.0 server session over one core connection (h11 style).

``receive_data(bytes)`` parses and acts on the broker core; ``data_to_send()`` returns
the bytes to write, and ``written()`` (after the host wrote them) settles what went out
at QoS 0. The session is the core's ``SessionCallback``, as the STOMP session is.

Credit: each subscription is one core consumer with a window of :data:`CREDIT` messages,
refilled as deliveries leave (written at QoS 0, PUBACK/PUBCOMP at QoS 1/2); the client's
Receive Maximum is the core connection's flow limit (Open MQ's connection flow limit),
so at most that many deliveries are unsettled at once, whichever subscription has them.
A held PUBLISH (producer flow control) gets its PUBACK/PUBREC when it goes through; the
packets behind it wait in the parser till then (a DISCONNECT behind it does not drop it).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from ...core import Broker, BrokerError, Delivery, DestinationKind, ServerConnection, ServerMessage
from ...core.errors import (
    AccessDenied,
    AuthenticationFailed,
    InvalidClientId,
    ResourceLimitExceeded,
)
from ...core.security import Principal
from . import codec, connect, messages, topics
from .codec import V5, MalformedPacket, Packet, PacketParser
from .hub import MqttHub, durable_name
from .inflight import Outbound, Settled, Settlements
from .session_state import Reach, StoredSession, SubscriptionState
from .topic_alias import TOPIC_ALIAS_MAXIMUM, InboundAliases, OutboundAliases

__all__ = ["CREDIT", "MAX_PACKET_BYTES", "RECEIVE_MAXIMUM", "MqttSession"]

CREDIT = 64
MAX_PACKET_BYTES = 1024 * 1024
#: a v5 client's QoS 2 PUBLISHes not yet released (PUBREL) at once; told in CONNACK
RECEIVE_MAXIMUM = 1000


class _Sub(NamedTuple):
    consumer_id: int
    state: SubscriptionState
    reach: Reach  #: what of the core's matches it drops


class MqttSession:
    """One client's MQTT session (see the module docstring)."""

    def __init__(self, broker: Broker, hub: MqttHub, *,
                 max_packet_bytes: int = MAX_PACKET_BYTES, max_keep_alive: int = 0) -> None:
        self.broker = broker
        self.hub = hub
        #: the longest keep-alive a client may ask (s; 0: any), as Mosquitto's
        #: max_keepalive: a v5 client asking more (or none) is told the Server Keep Alive,
        #: a 3.1.1 client asking more is refused (it cannot be told)
        self.max_keep_alive = max_keep_alive
        self.version = 4
        self.connected = False
        self.closing = False  #: the host writes what is pending, then closes
        self.max_packet_bytes = max_packet_bytes
        self._parser = PacketParser(max_packet_bytes)
        self._out: list[bytes] = []
        self._conn: ServerConnection | None = None
        self.client_id = ""
        self.keep_alive = 0  #: seconds (0: off)
        self.last_in = broker.now()
        self._stored: StoredSession | None = None
        self._persistent = False
        self._subs: dict[str, _Sub] = {}  # filter (with any $share/ prefix) -> sub
        self._by_consumer: dict[int, _Sub] = {}
        self._consumer_ids = itertools.count(1)
        self._outbound = Outbound()  # QoS 1/2 PUBLISHes not acknowledged to the end
        self._settlements = Settlements()  # acknowledgements of this read, not yet applied
        self._unsent_settle = Settlements()  # QoS 0 deliveries, settled once written
        self._will: ServerMessage | None = None
        self._will_delay = 0
        self._aliases_in = InboundAliases()
        self._aliases_out = OutboundAliases()  # the client's maximum set on CONNECT
        self._client_max_packet = 0
        self._held = 0  # PUBLISHes producer flow control holds
        self._msg_seq = itertools.count(1)
        self._clean_exit = False
        #: called when output appears outside receive_data (a delivery, a takeover)
        self.wakeup: Callable[[], None] | None = None
        self._receiving = False
        #: packets wait behind a held PUBLISH: the host calls receive_data(b"") once free
        self.input_waiting = False
        #: Set by a host that checks credentials off its event loop: CONNECT then stops
        #: at :attr:`login_request` (nothing after it is read) until the host calls
        #: :meth:`login_done` or :meth:`login_refused`.
        self.defer_login = False
        self.login_request: connect.ConnectRequest | None = None

    # ------------------------------------------------------------------ host interface

    def receive_data(self, data: bytes) -> None:
        """Parse and act on ``data``. Never raises for client mistakes."""
        if self.closing:
            return
        self.last_in = self.broker.now()
        self._parser.feed(data)
        self._receiving = True
        self.input_waiting = False
        try:
            while not self.closing:
                if self._held or self.login_request is not None:
                    # a PUBLISH is held, or the login is being checked: what follows
                    # (PUBLISHes, a DISCONNECT that would drop the held one) waits in
                    # the parser until send_done / login_done
                    self.input_waiting = self._parser.buffered > 0
                    break
                try:
                    item = self._parser.next_packet()
                    if item is None:
                        break
                    packet = codec.decode(item[0], item[1], self.version)
                    self._dispatch(packet)
                except MalformedPacket as exc:
                    self._close(exc.reason, str(exc))
                except topics.TopicError as exc:
                    self._close(0x90, str(exc))
                except BrokerError as exc:  # refused by the core (limits, names...)
                    self._close(0x97 if isinstance(exc, ResourceLimitExceeded) else 0x80,
                                exc.message)
                except (IndexError, ValueError, struct.error) as exc:  # a field cut short
                    self._close(0x81, f"malformed packet: {exc}")
        finally:
            self._receiving = False
            self._settlements.apply(self._conn, self._by_consumer)
            if self.closing:
                self.connection_lost()
            self.hub.save(self.client_id)

    def data_to_send(self) -> bytes:
        out, self._out = self._out, []
        return b"".join(out)

    def has_output(self) -> bool:
        return bool(self._out)

    def written(self) -> None:
        """What data_to_send gave was written: QoS 0 deliveries settle, windows refill."""
        self._unsent_settle.apply(self._conn, self._by_consumer)

    @property
    def reading_held(self) -> bool:
        """Producer flow control holds PUBLISHes, or the login is being checked: the
        host stops reading."""
        return self._held > 0 or self.login_request is not None

    def close_by_operator(self, reason: str, code: int = 0x98) -> None:
        """The host ends it: v5 DISCONNECT ``code`` (0x98, administrative action: the
        management API's close; 0x80 when the store lost what it sent) saying why."""
        self._close(code, reason)
        self.connection_lost()

    def check_keep_alive(self, now: int) -> bool:
        """Close (and publish the will) after 1.5 keep-alives of silence; True if so."""
        if self.closing or not self.keep_alive or self._held:
            return False  # held: the host is not reading, so silence is ours
        if now - self.last_in > self.keep_alive * 1500:
            self._close(0x8D, "keep alive timeout: nothing came for 1.5 keep-alive "
                        "intervals")
            self.connection_lost()
            return True
        return False

    def connection_lost(self) -> None:
        """The socket is gone or the session ended: will, session state, core. Idempotent."""
        self.closing = True
        conn, self._conn = self._conn, None
        if conn is None:
            return
        now = self.broker.now()
        hub = self.hub
        if hub.active.get(self.client_id) is self:
            del hub.active[self.client_id]
        will, self._will = self._will, None
        if will is not None and not self._clean_exit:
            hub.will(will, self.client_id, self._will_delay if self._persistent else 0,
                     conn.principal, now)
        stored = self._stored
        if not conn.closed and not self.broker.closed:
            conn.close()
        if stored is not None:
            if stored.expiry == 0:
                hub.discard(stored)
            else:
                stored.connection_ended(now)
                hub.save(self.client_id)

    # ------------------------------------------------------------------ SessionCallback

    def deliver(self, d: Delivery) -> None:
        self.deliver_many(d.consumer_id, d.delivery_tag, [d.message], [d.delivery_count])

    def deliver_many(self, consumer_id: int, first_tag: int, msgs: list[ServerMessage],
                     counts: list[int]) -> None:
        sub = self._by_consumer.get(consumer_id)
        if sub is None or self.closing:
            return
        if not self._out and not self._receiving and self.wakeup is not None:
            self.wakeup()
        now = self.broker.now()
        auto = sub.state.qos == 0
        for i, msg in enumerate(msgs):
            tag = first_tag + i
            if sub.reach.drops(msg):  # a $ topic, or no-local on a persistent session
                self._unsent_settle.delivered(consumer_id, 0 if auto else tag)
                continue
            qos = min(sub.state.qos, messages.message_qos(msg))
            retain = (sub.state.retain_as_published
                      and bool(msg.properties.get(messages.RETAIN_PROPERTY)))
            data = self._publish(msg, qos, retain, counts[i] > 1, now, sub.state,
                                 consumer_id, 0 if auto else tag)
            if data is None or qos == 0:
                self._unsent_settle.delivered(consumer_id, 0 if auto else tag)

    def _publish(self, msg: ServerMessage, qos: int, retain: bool, dup: bool, now: int,
                 state: SubscriptionState, consumer_id: int, tag: int) -> bytes | None:
        v5 = self.version == V5
        topic, payload, props = messages.to_publish(msg, now, v5)
        if v5 and state.subscription_id is not None:
            props["subscription_identifier"] = [state.subscription_id]
        alias, known = self._aliases_out.choose(topic) if v5 else (0, False)
        if alias:
            props["topic_alias"] = alias
        pid = self._outbound.next_pid() if qos else 0
        data = codec.encode_publish(self.version, "" if known else topic, payload, qos,
                                    pid, retain=retain, dup=dup and qos > 0, props=props)
        if self._client_max_packet and len(data) > self._client_max_packet:
            return None  # MQTT 5 3.1.2.11.4: a packet too big for the client is dropped
        if alias:
            self._aliases_out.used(topic, alias)
        if qos:
            self._outbound.sent(pid, qos, consumer_id, tag)
        self._out.append(data)
        return data

    def consumer_closed(self, consumer_id: int, reason: str) -> None:
        self._by_consumer.pop(consumer_id, None)

    def send_done(self, ticket: object, error: BrokerError | None) -> None:
        """A held PUBLISH went through (its PUBACK/PUBREC now) or failed."""
        assert isinstance(ticket, tuple)
        qos, pid = ticket
        self._held -= 1
        if self.closing:
            return
        if not self._held and self._parser.buffered:
            self.input_waiting = True  # the host acts on what waited (receive_data(b""))
        if self.wakeup is not None:
            self.wakeup()
        if error is not None and self.version != V5:
            self._close(0x97, error.message)
            return
        reason = 0x97 if error is not None else 0
        why = error.message[:200] if error is not None else None
        if qos == 1:
            self._out.append(codec.encode_ack(self.version, codec.PUBACK, pid, reason, why))
        elif qos == 2:
            self._out.append(codec.encode_ack(self.version, codec.PUBREC, pid, reason, why))

    # ------------------------------------------------------------------ packets

    def _dispatch(self, p: Packet) -> None:
        if not self.connected:
            if p.type != codec.CONNECT:
                raise MalformedPacket("the first packet must be CONNECT", 0x82)
            return self._on_connect(p.fields)
        handler = _HANDLERS.get(p.type)
        if handler is None:
            raise MalformedPacket(f"packet type {p.type} after CONNECT", 0x82)
        handler(self, p.fields)

    def _close(self, reason: int, text: str) -> None:
        """End the session for a protocol problem: a v5 DISCONNECT saying why."""
        if self.connected and self.version == V5:
            self._out.append(codec.encode_disconnect(reason, text[:200]))
        self.closing = True

    def _refuse(self, code: int, text: str | None = None) -> None:
        """A CONNACK refusing the connection (``code``, v5: ``text`` its reason
        string); then the session closes."""
        self._connack(code, props={"reason_string": text[:200]} if text else None)
        self.closing = True

    def _connack(self, code: int, present: bool = False,
                 props: dict[str, Any] | None = None) -> None:
        self._out.append(codec.encode_connack(self.version, present, code, props))

    def _on_connect(self, f: dict[str, Any]) -> None:
        self.version = connect.protocol_version(f)
        try:
            request = connect.read_connect(f, self.max_keep_alive)
        except connect.ConnectRefused as no:
            return self._refuse(no.code)
        policy = self.broker.security
        if self.defer_login and policy is not None and policy.enabled:
            self.login_request = request  # the host checks it, then login_done()
            return
        self._finish_connect(request, None)

    def login_done(self, principal: Principal) -> None:
        """The host checked :attr:`login_request`'s credentials (off its event loop):
        connect, answer CONNACK; the packets that came meanwhile are acted on next
        (``input_waiting``)."""
        request, self.login_request = self.login_request, None
        if request is None or self.closing:
            return
        self._receiving = True
        try:
            self._finish_connect(request, principal)
        finally:
            self._receiving = False
            self.hub.save(self.client_id)
        if self.closing:
            self.connection_lost()
        elif self._parser.buffered:
            self.input_waiting = True

    def login_refused(self, throttled: bool, text: str) -> None:
        """The host refused :attr:`login_request`: CONNACK "bad user name or password"
        (0x86; 3.1.1: 4), or, ``throttled``, "connection rate exceeded" (0x9F; 3.1.1:
        3, server unavailable: try later); v5 says ``text``. Then the session closes."""
        self.login_request = None
        if self.closing:
            return
        v5 = self.version == V5
        self._refuse((0x9F if v5 else 0x03) if throttled else (0x86 if v5 else 0x04), text)
        self.connection_lost()

    def _finish_connect(self, request: connect.ConnectRequest,
                        principal: Principal | None) -> None:
        v5 = self.version == V5
        try:  # the login first: a client that cannot log in takes no session over
            conn = self.broker.connect(self, user=request.user, password=request.password,
                                       principal=principal,
                                       flow_limit=request.receive_maximum)
        except AuthenticationFailed as exc:
            return self._refuse(0x86 if v5 else 0x04, exc.message.split(";")[0])
        except InvalidClientId:
            return self._refuse(0x85 if v5 else 0x02)
        except BrokerError as exc:
            return self._refuse(0x88 if v5 else 0x03, exc.message)
        client_id, hub = request.client_id, self.hub
        old = hub.active.get(client_id)
        if old is not None:
            old.taken_over()
        hub.cancel_will(client_id)
        stored = hub.sessions.get(client_id)
        if stored is not None and request.clean:
            hub.discard(stored)
            stored = None
        self._conn = conn
        self.client_id = client_id
        self.connected = True
        self.keep_alive = request.keep_alive
        self._client_max_packet = request.max_packet
        self._aliases_out.maximum = request.topic_alias_maximum
        hub.active[client_id] = self
        present = stored is not None
        # a resumed session's subscriptions stay durable whatever this connection's
        # expiry (v5 without the property: 0, the session ends with this connection)
        expiry = request.expiry
        self._persistent = expiry != 0 or present
        if stored is None:
            stored = StoredSession(client_id, expiry)
            if self._persistent:
                hub.sessions[client_id] = stored
        stored.expiry, stored.expires_at, stored.principal = expiry, None, conn.principal
        stored.connections.add(conn.connection_id)
        self._stored = stored
        will = request.will
        if will is not None:
            self._will = messages.from_publish(
                will["topic"], will["payload"], will["qos"], will["retain"],
                will["properties"], self._message_id(), self.broker.now())
            self._will_delay = will["properties"].get("will_delay_interval", 0)
        answer: dict[str, Any] = {}
        if v5:
            answer = {"assigned_client_identifier": request.assigned,
                      "topic_alias_maximum": TOPIC_ALIAS_MAXIMUM,
                      "maximum_packet_size": self.max_packet_bytes,
                      "receive_maximum": RECEIVE_MAXIMUM}
            if request.server_keep_alive:
                answer["server_keep_alive"] = request.server_keep_alive
        self._connack(0, present, answer)
        for pid in self._outbound.adopt(stored.outbound_pubrel):  # MQTT-4.4.0-1
            self._out.append(codec.encode_ack(self.version, codec.PUBREL, pid))
        for state in list(stored.subscriptions.values()):
            self._attach(state)

    def taken_over(self) -> None:
        """Another connection connected with this client id: end this one (v5 0x8E)."""
        self._close(0x8E, "session taken over by another connection with this client id")
        self.connection_lost()
        if self.wakeup is not None:
            self.wakeup()

    def _message_id(self) -> str:
        conn_id = self._conn.connection_id if self._conn is not None else 0
        return f"ID:{self.broker.name}-mqtt-{conn_id}-{next(self._msg_seq)}"

    def _on_publish(self, f: dict[str, Any]) -> None:
        conn = self._conn
        assert conn is not None
        qos, pid, props, topic = f["qos"], f["packet_id"], f["properties"], f["topic"]
        topic = self._aliases_in.resolve(props.get("topic_alias"), topic)
        stored = self._stored
        assert stored is not None
        if qos == 2 and pid in stored.inbound_qos2:  # a resent PUBLISH: routed already
            self._out.append(codec.encode_ack(self.version, codec.PUBREC, pid))
            return
        if qos and self.version == V5 and len(stored.inbound_qos2) >= RECEIVE_MAXIMUM:
            raise MalformedPacket(f"more QoS 2 PUBLISHes unreleased than the Receive "
                                  f"Maximum of {RECEIVE_MAXIMUM} this broker gave", 0x93)
        msg = messages.from_publish(topic, f["payload"], qos, f["retain"], props,
                                    self._message_id(), self.broker.now())
        if qos == 2:
            stored.inbound_qos2.add(pid)
        try:
            done = conn.send(msg, None, ticket=(qos, pid))
        except AccessDenied as exc:
            if self.version != V5:  # 3.1.1 has no negative PUBACK: acked, dropped
                done = True
            else:
                if qos:
                    self._out.append(codec.encode_ack(
                        self.version, codec.PUBACK if qos == 1 else codec.PUBREC, pid, 0x87,
                        exc.message[:200]))
                return
        if f["retain"]:
            self.hub.retain(msg)
        if not done:
            self._held += 1
            return
        if qos == 1:
            self._out.append(codec.encode_ack(self.version, codec.PUBACK, pid))
        elif qos == 2:
            self._out.append(codec.encode_ack(self.version, codec.PUBREC, pid))

    def _on_pubrel(self, f: dict[str, Any]) -> None:
        assert self._stored is not None
        pid, unreleased = f["packet_id"], self._stored.inbound_qos2
        known = pid in unreleased
        unreleased.discard(pid)
        self._out.append(codec.encode_ack(self.version, codec.PUBCOMP, pid, 0 if known else 0x92))

    def _on_puback(self, f: dict[str, Any]) -> None:
        self._settled(self._outbound.puback(f["packet_id"]))  # an unknown id: ignored

    def _on_pubrec(self, f: dict[str, Any]) -> None:
        pid = f["packet_id"]
        if f["reason"] >= 0x80:  # v5: the client refused it, the exchange ends here
            return self._settled(self._outbound.pubcomp(pid))
        tag = self._outbound.pubrec(pid)
        if tag is None:
            self._out.append(codec.encode_ack(self.version, codec.PUBREL, pid, 0x92))
            return
        if tag and self._conn is not None:
            self._conn.ack([tag])  # the client has it: never to be sent again
        self._out.append(codec.encode_ack(self.version, codec.PUBREL, pid))

    def _on_pubcomp(self, f: dict[str, Any]) -> None:
        self._settled(self._outbound.pubcomp(f["packet_id"]))

    def _settled(self, settled: Settled | None) -> None:
        self._settlements.add(settled)  # applied at the end of the read (inflight)

    def _on_subscribe(self, f: dict[str, Any]) -> None:
        sub_ids = f["properties"].get("subscription_identifier")
        codes = []
        retained: list[tuple[SubscriptionState, str]] = []
        version_asked = False
        for text, options in f["topics"]:
            if text == topics.SYS_VERSION:
                version_asked = True
                codes.append(0)
                continue
            group, topic_filter = topics.split_share(text)
            state = SubscriptionState.from_options(text, options,
                                                   sub_ids[0] if sub_ids else None, group)
            new = text not in self._subs
            try:
                topics.core_filter(topic_filter)
                self._unsubscribe(text, keep_durable=True)
                self._attach(state)
            except (topics.TopicError, BrokerError) as exc:
                codes.append(topics.suback_refusal(exc, self.version == V5))
                continue
            assert self._stored is not None
            self._stored.subscriptions[text] = state
            codes.append(state.qos)
            handling = (options >> 4) & 3 if self.version == V5 else 0
            if group is None and (handling == 0 or (handling == 1 and new)):
                retained.append((state, topic_filter))
        self._out.append(codec.encode_suback(self.version, f["packet_id"], codes))
        if version_asked:
            self._out.append(codec.encode_publish(
                self.version, topics.SYS_VERSION, topics.SYS_VERSION_TEXT.encode(), 0, 0,
                retain=True))
        for state, topic_filter in retained:
            self._send_retained(state, topic_filter)

    def _attach(self, state: SubscriptionState) -> None:
        conn = self._conn
        assert conn is not None
        group, topic_filter = topics.split_share(state.topic_filter)
        pattern = topics.core_filter(topic_filter)
        cid, durable = next(self._consumer_ids), self._persistent and group is None
        own = self._stored.connections if durable and state.no_local and self._stored else None
        sub = _Sub(cid, state, Reach(not topics.reaches(topic_filter, "$"), own))
        self._subs[state.topic_filter] = sub
        self._by_consumer[cid] = sub
        try:
            conn.create_consumer(
                cid, DestinationKind.TOPIC, pattern, no_local=state.no_local and not durable,
                subscription_name=(durable_name(self.client_id, state.topic_filter)
                                   if durable else state.topic_filter if group else None),
                durable=durable, shared=group is not None or durable,
                auto_ack=state.qos == 0)
        except BaseException:
            del self._subs[state.topic_filter], self._by_consumer[cid]
            raise
        conn.grant_credit(cid, CREDIT)  # delivers what the subscription holds already

    def _send_retained(self, state: SubscriptionState, topic_filter: str) -> None:
        now = self.broker.now()
        for msg in self.hub.retained_for(topic_filter, now):
            qos = min(state.qos, messages.message_qos(msg))
            self._publish(msg, qos, True, False, now, state, 0, 0)

    def _unsubscribe(self, text: str, keep_durable: bool = False) -> bool:
        sub = self._subs.pop(text, None)
        conn = self._conn
        if sub is None or conn is None:
            return False
        self._by_consumer.pop(sub.consumer_id, None)
        self._settlements.apply(conn, self._by_consumer)  # before its deliveries go back
        conn.close_consumer(sub.consumer_id)
        self._outbound.consumer_closed(sub.consumer_id)
        if self._persistent and sub.state.share is None and not keep_durable:
            conn.unsubscribe(durable_name(self.client_id, text))
        return True

    def _on_unsubscribe(self, f: dict[str, Any]) -> None:
        codes = []
        for text, _ in f["topics"]:
            found = self._unsubscribe(text) or text == topics.SYS_VERSION
            if self._stored is not None:
                self._stored.subscriptions.pop(text, None)
            codes.append(0 if found else 0x11)
        self._out.append(codec.encode_unsuback(self.version, f["packet_id"], codes))

    def _on_pingreq(self, f: dict[str, Any]) -> None:
        self._out.append(codec.PINGRESP_BYTES)

    def _on_disconnect(self, f: dict[str, Any]) -> None:
        """A normal DISCONNECT drops the will (v5 reason 0x04 keeps it)."""
        self._clean_exit = f.get("reason", 0) != 0x04
        expiry = f.get("properties", {}).get("session_expiry_interval")
        if expiry is not None and self._stored is not None and self._persistent:
            self._stored.expiry = None if expiry == connect.NEVER else expiry
        self.closing = True


_HANDLERS: dict[int, Callable[[MqttSession, dict[str, Any]], None]] = {
    codec.PUBLISH: MqttSession._on_publish,
    codec.PUBACK: MqttSession._on_puback,
    codec.PUBREC: MqttSession._on_pubrec,
    codec.PUBREL: MqttSession._on_pubrel,
    codec.PUBCOMP: MqttSession._on_pubcomp,
    codec.SUBSCRIBE: MqttSession._on_subscribe,
    codec.UNSUBSCRIBE: MqttSession._on_unsubscribe,
    codec.PINGREQ: MqttSession._on_pingreq,
    codec.DISCONNECT: MqttSession._on_disconnect,
}
