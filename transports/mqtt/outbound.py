"""The sending half of the mqtt:// transport: PUBLISH, the wait of a synchronous send for
its PUBACK, and asynchronous sends that keep several QoS 1 PUBLISHes in flight.

:class:`Outbound` owns the sending state of one transport (the window, the FIFO of
outstanding sends, PUBACKs that beat their ``publish()``); it reaches the transport only
through :class:`OutboundHost`.

Synchronous send. A PERSISTENT ``send()`` is a QoS 1 PUBLISH that returns once the
broker's PUBACK is in (``sync_send=false``: at once); NON_PERSISTENT is QoS 0.

Asynchronous send (JMS 2 ``send(..., completion_listener)``). The core calls
``send_async(message, tx, done)``; the PUBLISH leaves at once and ``done(None)`` is called
when the broker has the message: its PUBACK for QoS 1 (PERSISTENT), the hand-over to
paho for QoS 0 (NON_PERSISTENT, which MQTT never confirms). ``done`` runs on paho's network
thread (or the sender's), so the core must only hand it on to a thread of its own.

* Order: ``done`` calls come in the order of the ``send_async`` calls (JMS requires
  completions in send order). Brokers PUBACK in PUBLISH order anyway; a FIFO enforces it
  for QoS 0 sends mixed with QoS 1 ones.
* Window: at most ``send_window`` sends are outstanding (URL ``send_window``, default
  100, also paho's in-flight limit); a sender that finds it full blocks, which bounds
  memory the way a producer flow limit does, until PUBACKs have freed *half* the window
  (Open MQ's flow threshold, applied to sends). Resuming at the first free place woke the
  sender for every PUBACK: one thread hand-off per message, where this makes one per half
  window (the producer's system time fell by a third on the part (d) window row).
* Parked: a sender on an event loop's thread (``jmspy.aio``, or a completion listener
  used from a coroutine) never blocks. Its send is *parked* when the window is full, and
  so is every later send while some are parked (they keep their order). Whichever thread
  frees a place (the one that read the PUBACK: paho's, or the loop holding the reading)
  writes the next parked PUBLISH at once. Blocking there instead made the loop wait for
  a PUBACK it was the one to read: paho's thread took the reading back for every full
  window and lent it again after, which cost a ``gather`` of sends more than reading on
  the loop saved. A parked send holds only what its sender holds already (the message,
  the future awaiting it). While the transport reconnects, a send on a loop's thread is
  parked too (paho has no client to take it; waiting for one would stop the loop for
  the whole reconnect), and parked sends outlive a drop, as they were never written:
  the reconnect writes them, in order, once the new client is up; a close or a
  reconnect given up fails them.
* Failure: a refused PUBACK (MQTT 5 reason code >= 0x80), a PUBLISH paho could not queue,
  or a connection that drops or closes before the PUBACK (or before a parked send was
  written): ``done(JMSException)``, in order. Nothing is resent by the transport (after
  a drop the broker may or may not have the message; the application decides, as with a
  synchronous send that failed).

The race to guard: paho may deliver a PUBACK (``on_publish``) before ``publish()`` has
returned the packet id to the sender. Entries are registered before ``publish()``; a
PUBACK for an id not registered yet, while some publish is in progress, is kept in
``_early_acks`` for the sender to find. paho calls ``on_publish`` holding its own mutex,
which ``publish()`` also takes, so ``_send_lock`` is never held across a paho call.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from jmspy import errors
from jmspy.message import Message
from jmspy.transport import on_event_loop

from .lent_reading import READER_LOOK
from .mapping import mqtt_topic, payload_of, to_publish_v5
from .quick_ack import QuickAck

__all__ = ["Done", "Outbound", "OutboundHost"]

Done = Callable[[Exception | None], None]


class _Pending:
    """One asynchronous send awaiting its outcome."""

    __slots__ = ("done", "error", "finished", "message_id", "mid")

    def __init__(self, done: Done, message_id: str | None) -> None:
        self.done = done
        self.message_id = message_id
        self.mid: int | None = None
        self.finished = False
        self.error: Exception | None = None


class OutboundHost(Protocol):
    """What :class:`Outbound` asks of the transport."""

    @property
    def version(self) -> str: ...

    def client(self, wait: bool = True) -> Any:
        """The live paho client (waits out a reconnect; raises when there is none)."""

    def describe(self) -> str:
        """"MQTT <version> broker at host:port", for errors."""

    @property
    def sync_send(self) -> bool:
        """A QoS 1 ``send()`` waits for its PUBACK (URL ``sync_send``)."""

    @property
    def send_timeout_ms(self) -> int:
        """sendTimeout (ms): how long it waits (0: 30 s)."""

    @property
    def max_packet_size(self) -> int | None:
        """The broker's Maximum Packet Size from its MQTT 5 CONNACK (None: not said)."""

    def need_reader(self) -> None:
        """A thread is about to wait for a packet: whoever holds the reading reads."""

    @property
    def reconnecting(self) -> bool:
        """The connection dropped and a reconnect is under way (sends would wait)."""


class Outbound:
    """PUBLISH and the asynchronous-send window of one transport."""

    def __init__(self, host: OutboundHost, window: int) -> None:
        self._host = host
        self.send_window = window
        self._send_lock = threading.Lock()
        self._freed = threading.Condition(self._send_lock)
        self._free = window  # places not held by an outstanding send
        self._resume = max(1, window // 2)  # a blocked sender waits for this many
        self._blocked = 0  # senders waiting for places
        self._sends: deque[_Pending] = deque()
        self._sends_by_mid: dict[int, _Pending] = {}
        self._early_acks: dict[int, Exception | None] = {}
        self._publishing = 0
        self._parked: deque[tuple[_Pending, Message]] = deque()  # not written yet
        self._draining = False  # a thread is writing parked sends: later ones park
        #: the last QoS 1 PUBLISH of a sync_send=false send (close waits for it)
        self.last_publish: Any = None
        #: how many times the connection dropped, and why the last time (the broker's
        #: DISCONNECT reason): what a synchronous send waiting for its PUBACK checks
        self._drops = 0
        self._drop_why = ""
        #: no delayed-ACK stall for a synchronous send (quick_ack.py says which)
        self.quick_ack = QuickAck()

    def dropped(self, why: str) -> None:
        """The connection dropped: a synchronous send waiting for its PUBACK fails with
        ``why``."""
        self._drop_why = why
        self._drops += 1

    def send(self, message: Message) -> None:
        """PUBLISH ``message`` (already checked); a QoS 1 one returns once its PUBACK is in
        (``sync_send=false``: at once)."""
        host = self._host
        drops = self._drops
        if message.delivery_mode != 2 or not host.sync_send:
            info, qos = self.publish(message)
            if qos:
                self.last_publish = info
            return
        quick = self.quick_ack
        quick.begin(host.client())
        try:
            self._publish_and_wait(message, drops)
        finally:
            quick.end()

    def _publish_and_wait(self, message: Message, drops: int) -> None:
        """A synchronous QoS 1 send: PUBLISH, then wait for the PUBACK."""
        host = self._host
        info, _ = self.publish(message)
        timeout_ms = host.send_timeout_ms
        wait = timeout_ms / 1000.0 if timeout_ms > 0 else 30.0
        deadline = time.monotonic() + wait
        try:
            # in slices: paho does not end this wait when the broker drops the
            # connection (an MQTT 5 DISCONNECT "Packet too large", say), this does
            while not info.is_published() and time.monotonic() < deadline:
                if self._drops != drops:
                    raise errors.JMSException(
                        f"the connection to the {host.describe()} dropped before it "
                        f"acknowledged message {message.message_id}: {self._drop_why}",
                        error_code="CONNECTION_INTERRUPTED")
                host.need_reader()  # an event loop holding the reading gives it back
                info.wait_for_publish(min(0.05, max(0.0, deadline - time.monotonic())))
        except (RuntimeError, ValueError) as exc:
            raise errors.JMSException(
                f"the {host.describe()} did not take message {message.message_id}: {exc}"
            ) from exc
        if not info.is_published():
            raise errors.ResourceAllocationException(
                f"the {host.describe()} did not acknowledge message "
                f"{message.message_id} to {message.destination} within "
                f"sendTimeout={timeout_ms or 30_000} ms: it is holding the "
                "publish (its queue or in-flight limit is full), or it stopped "
                "answering; check the broker, or raise sendTimeout")

    def publish(self, message: Message) -> tuple[Any, int]:
        """PUBLISH ``message`` (already checked); (paho's MQTTMessageInfo, QoS)."""
        assert message.destination is not None
        topic = mqtt_topic(message.destination)
        qos = 1 if message.delivery_mode == 2 else 0
        properties: Any = None
        if self._host.version == "5":
            payload, properties = to_publish_v5(message)
        else:
            payload = payload_of(message)[0]
        limit = self._host.max_packet_size
        if limit is not None:
            size = publish_size(topic, payload, qos, properties)
            if size > limit:  # MQTT-3.2.2-15: the client must not send it
                raise errors.MessageFormatException(
                    f"Packet too large: message {message.message_id} to {topic!r} makes a "
                    f"PUBLISH of {size:,} bytes and the {self._host.describe()} takes "
                    f"packets up to {limit:,} (the Maximum Packet Size of its CONNACK); it "
                    "was not sent, and the connection stays up. Send a smaller body, or "
                    "raise the broker's max_packet_size")
        info = self._host.client().publish(topic, payload, qos=qos, retain=False,
                                           properties=properties)
        if info.rc != 0:
            from paho.mqtt.client import error_string

            raise errors.JMSException(
                f"publishing to {topic!r} on the {self._host.describe()} failed: "
                f"{error_string(info.rc)}"
            )
        return info, qos

    def publish_async(self, message: Message, done: Done) -> None:
        """The second half of ``send(message, done=...)``: the message is checked."""
        entry = _Pending(done, message.message_id)
        with self._send_lock:
            parked = bool(self._parked) or (
                (not self._free or self._host.reconnecting) and on_event_loop())
            if parked:
                self._parked.append((entry, message))
            else:
                if not self._free:
                    self._wait_for_room()
                self._reserve(entry)
        # a parked send is written now only if a place is free and nobody else drains
        # (else the thread that frees a place, drains or reconnects writes it)
        if parked or self._publish_entry(entry, message):
            self._drain_parked()

    def _wait_for_room(self) -> None:
        # _send_lock held, the window full: a blocking sender waits for half of it
        self._blocked += 1
        deadline = time.monotonic() + 30.0
        try:
            while self._free < self._resume and time.monotonic() < deadline:
                # an event loop holding the reading gives it back; it may be lent again
                # meanwhile
                self._host.need_reader()
                self._freed.wait_for(lambda: self._free >= self._resume, READER_LOOK)
        finally:
            self._blocked -= 1
        if not self._free:
            raise errors.JMSException(
                f"the {self._host.describe()} confirmed none of the "
                f"{self.send_window} messages in flight for 30s (send_window); is it "
                "overloaded?"
            )

    def _reserve(self, entry: _Pending) -> None:
        # _send_lock held, a place free: the send holds it until its completion
        self._free -= 1
        self._sends.append(entry)
        self._publishing += 1

    def _publish_entry(self, entry: _Pending, message: Message) -> bool:
        """PUBLISH a send that holds a place (the lock not held: paho takes its own);
        True when parked sends may now be written (a place came free meanwhile)."""
        info: Any = None
        error: Exception | None = None
        try:
            info, qos = self.publish(message)
        except Exception as exc:
            error = exc
        with self._send_lock:
            self._publishing -= 1
            if entry.finished:
                pass  # the connection dropped meanwhile: fail_all failed it
            elif error is not None:
                self._finish(entry, error)
            elif qos == 0:
                self._finish(entry, None)
            else:
                entry.mid = mid = info.mid
                if mid in self._early_acks:
                    self._finish(entry, self._early_acks.pop(mid))
                else:
                    self._sends_by_mid[mid] = entry
            if not self._publishing:
                self._early_acks.clear()  # PUBACKs of synchronous sends meanwhile
            return self._complete_in_order()

    def _drain_parked(self) -> None:
        """Write parked sends, oldest first, while the window has places; one thread at
        a time (sends parked meanwhile queue behind, and are written here too)."""
        with self._send_lock:
            if self._draining:
                return
            self._draining = True
        try:
            while True:
                with self._send_lock:
                    if not self._parked or not self._free or self._host.reconnecting:
                        self._draining = False
                        return
                    entry, message = self._parked.popleft()
                    self._reserve(entry)
                self._publish_entry(entry, message)
        except BaseException:
            with self._send_lock:
                self._draining = False
            raise

    @property
    def blocked_senders(self) -> int:
        """Senders waiting for the window to reopen (for tests and troubleshooting)."""
        with self._send_lock:
            return self._blocked

    @property
    def parked_sends(self) -> int:
        """Sends of event-loop threads waiting for a place to be written (for tests and
        troubleshooting)."""
        with self._send_lock:
            return len(self._parked)

    @property
    def free_places(self) -> int:
        """Places left in the window (for tests and troubleshooting): every send holds
        one from ``publish_async`` until its completion is called."""
        with self._send_lock:
            return self.send_window - len(self._sends)

    def on_publish(self, client: Any, userdata: Any, mid: int, reason: Any, props: Any) -> None:
        """paho's network thread: a PUBACK (QoS 1) or a QoS 0 PUBLISH written out."""
        error: Exception | None = None
        if getattr(reason, "is_failure", False):
            error = errors.JMSException(
                f"the {self._host.describe()} refused the message (PUBACK reason: {reason})"
            )
        with self._send_lock:
            entry = self._sends_by_mid.pop(mid, None)
            if entry is None:
                if self._publishing:  # maybe an async send whose publish() has not returned
                    self._early_acks[mid] = error
                return
            if error is not None and entry.message_id:
                error = errors.JMSException(f"{error} for {entry.message_id}")
            self._finish(entry, error)
            drain = self._complete_in_order()
        if drain:
            self._drain_parked()  # on the thread that read the PUBACK

    def resume(self) -> None:
        """(The reconnect thread.) Reconnected: write the sends parked meanwhile."""
        self._drain_parked()

    def fail_all(self, why: str, *, parked: bool = True) -> None:
        """The connection dropped or closed: every outstanding send failed, and the
        parked ones too unless ``parked`` is False (a drop: the reconnect writes them)."""
        with self._send_lock:
            for entry in self._sends:
                if not entry.finished:
                    self._finish(entry, errors.JMSException(
                        f"no PUBACK for {entry.message_id}: {why}; the broker may or may "
                        "not have the message"
                    ))
            self._sends_by_mid.clear()
            self._early_acks.clear()
            self._complete_in_order()
            if not parked:
                return
            unsent, self._parked = self._parked, deque()
            for entry, _ in unsent:  # after every written one: send order
                try:
                    entry.done(errors.JMSException(
                        f"{entry.message_id} was not sent: {why} (it waited for room in "
                        f"the send window of {self.send_window}, or for a reconnect)"))
                except Exception:  # the core's hand-off only queues; never stop the others
                    pass

    def _finish(self, entry: _Pending, error: Exception | None) -> None:
        # _send_lock held
        entry.finished = True
        entry.error = error

    def _complete_in_order(self) -> bool:
        """(_send_lock held.) Call ``done`` for every finished send at the head of the
        FIFO; True when parked sends can be written now (by the caller, once it has let
        go of the lock)."""
        sends = self._sends
        while sends and sends[0].finished:
            entry = sends.popleft()
            self._free += 1
            if self._blocked and self._free == self._resume:
                self._freed.notify_all()
            try:
                entry.done(entry.error)
            except Exception:  # the core's hand-off only queues; never stop the others
                pass
        return (bool(self._parked) and self._free > 0 and not self._draining
                and not self._host.reconnecting)


def publish_size(topic: str, payload: bytes, qos: int, properties: Any) -> int:
    """The bytes of the PUBLISH packet paho will write: fixed header (type byte and the
    remaining length's variable-length integer), topic, packet id (QoS > 0), the v5
    properties with their length (``properties`` None: MQTT 3.1.1, none), payload."""
    remaining = 2 + len(topic.encode("utf-8")) + (2 if qos else 0) + len(payload)
    if properties is not None:
        remaining += len(properties.pack())
    length_bytes = 1
    while remaining >= 128 ** length_bytes:
        length_bytes += 1
    return 1 + length_bytes + remaining
