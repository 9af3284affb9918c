"""The JMS 2.0 simplified API: one :class:`JMSContext` in place of a connection and a
session, producers that send a body as it is, consumers that return a body typed.

Why a face of its own over the same core: the classic API takes five objects to send one
string (factory, connection, session, producer, message) and leaves ``start()`` to be
forgotten. JMS 2.0 folds the connection and session into a context, starts it when the
first consumer is made (``autoStart``), and lets a producer send ``"text"``, ``b"bytes"``
or a ``dict`` directly. Everything underneath is the classic API's -- one
:class:`~jmspy.connection.Connection`, one :class:`~jmspy.session.Session`, its
producers and consumers -- so flow control, acknowledgement modes, selectors and every
error are the same::

    with ConnectionFactory("vm://embedded").create_context() as context:
        queue = context.create_queue("orders")
        context.create_producer().set_priority(7).send(queue, "hello")
        text = context.create_consumer(queue).receive_body(str, timeout=5)

A context is used by one thread at a time, like the session it owns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, TypeVar

from .acknowledgement import AckMode, AckModes
from .connection import ExceptionCallback
from .consumer import ListenerType, MessageConsumer, QueueBrowser
from .destinations import Destination, Queue, TemporaryQueue, TemporaryTopic, Topic
from .errors import IllegalStateException, MessageFormatException
from .flow import FlowStats
from .message import BytesMessage, MapMessage, Message, PropertyValue, TextMessage
from .producer import CompletionCallback, MessageProducer

if TYPE_CHECKING:
    from .connection import Connection
    from .session import Session

__all__ = ["Body", "JMSConsumer", "JMSContext", "JMSProducer"]

T = TypeVar("T")

#: What ``JMSProducer.send`` takes as a body: a str (sent as a TextMessage), bytes (a
#: BytesMessage), a mapping (a MapMessage), a Message as it is, or None (a TextMessage
#: without text).
Body = str | bytes | Mapping[str, "PropertyValue | bytes"] | Message | None


class JMSContext(AckModes):
    """A connection and one session on it, made by ``factory.create_context()``.

    ``session_mode`` is one of the :class:`AckModes` constants (the session's
    acknowledgement mode; ``SESSION_TRANSACTED`` for a transacted one). The connection
    starts when the first consumer is created (``auto_start``, JMS 2.0's default);
    ``set_auto_start(False)`` leaves that to :meth:`start`. Closing the context closes both.
    """

    def __init__(self, connection: Connection, session_mode: int = AckMode.AUTO_ACKNOWLEDGE
                 ) -> None:
        """Own ``connection`` (a new one: the context closes it) and a session of
        ``session_mode`` on it; ``factory.create_context()`` is the usual way here."""
        self._connection = connection
        try:
            self._session: Session = connection.create_session(
                transacted=session_mode == AckMode.SESSION_TRANSACTED, ack_mode=session_mode)
        except BaseException:
            connection.close()
            raise
        self._auto_start = True
        self._closed = False

    # -- life -----------------------------------------------------------------------
    @property
    def session_mode(self) -> AckMode:
        return self._session.ack_mode

    @property
    def auto_start(self) -> bool:
        return self._auto_start

    def set_auto_start(self, auto_start: bool) -> None:
        """Whether creating a consumer starts the connection (default True)."""
        self._check_open()
        self._auto_start = bool(auto_start)

    def start(self) -> None:
        """Start (or resume) delivery to this context's consumers."""
        self._check_open()
        self._connection.start()

    def stop(self) -> None:
        """Pause delivery; messages stay buffered."""
        self._check_open()
        self._connection.stop()

    def set_exception_listener(self, listener: ExceptionCallback | None) -> None:
        """Hear about problems no call can raise (a lost connection, a failed listener)."""
        self._check_open()
        self._connection.set_exception_listener(listener)

    @property
    def client_id(self) -> str | None:
        return self._connection.client_id

    def close(self) -> None:
        """Close the session (rolling back an open transaction) and the connection."""
        if self._closed:
            return
        self._closed = True
        self._connection.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> JMSContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<JMSContext {self.session_mode.name} on {self._connection.where}{state}>"

    # -- destinations and messages --------------------------------------------------
    def create_queue(self, name: str, *, options: Mapping[str, object] | None = None) -> Queue:
        self._check_open()
        return self._session.create_queue(name, options=options)

    def create_topic(self, name: str, *, options: Mapping[str, object] | None = None) -> Topic:
        self._check_open()
        return self._session.create_topic(name, options=options)

    def create_temporary_queue(self) -> TemporaryQueue:
        self._check_open()
        return self._session.create_temporary_queue()

    def create_temporary_topic(self) -> TemporaryTopic:
        self._check_open()
        return self._session.create_temporary_topic()

    def create_message(self, properties: Mapping[str, PropertyValue] | None = None
                       ) -> Message:
        self._check_open()
        return self._session.create_message(properties)

    def create_text_message(self, text: str | None = None,
                            properties: Mapping[str, PropertyValue] | None = None
                            ) -> TextMessage:
        self._check_open()
        return self._session.create_text_message(text, properties)

    def create_bytes_message(self, data: bytes | None = None,
                             properties: Mapping[str, PropertyValue] | None = None
                             ) -> BytesMessage:
        self._check_open()
        return self._session.create_bytes_message(data, properties)

    def create_map_message(self, values: Mapping[str, PropertyValue | bytes] | None = None,
                           properties: Mapping[str, PropertyValue] | None = None
                           ) -> MapMessage:
        self._check_open()
        return self._session.create_map_message(values, properties)

    # -- producers and consumers ----------------------------------------------------
    def create_producer(self) -> JMSProducer:
        """A producer that names its destination on each ``send``."""
        self._check_open()
        return JMSProducer(self._session, self._session.create_producer())

    def create_consumer(self, destination: Destination, selector: str | None = None,
                        no_local: bool = False) -> JMSConsumer:
        """A consumer on a queue, or a non-durable subscription on a topic; starts the
        connection if ``auto_start`` is on."""
        self._check_open()
        return self._started(self._session.create_consumer(destination, selector, no_local))

    def create_durable_consumer(self, topic: Topic, name: str, selector: str | None = None,
                                no_local: bool = False) -> JMSConsumer:
        """An unshared durable subscription (the factory needs a ``clientID``)."""
        self._check_open()
        return self._started(
            self._session.create_durable_consumer(topic, name, selector, no_local))

    def create_shared_consumer(self, topic: Topic, name: str, selector: str | None = None
                               ) -> JMSConsumer:
        """A shared non-durable subscription."""
        self._check_open()
        return self._started(self._session.create_shared_consumer(topic, name, selector))

    def create_shared_durable_consumer(self, topic: Topic, name: str,
                                       selector: str | None = None) -> JMSConsumer:
        """A shared durable subscription."""
        self._check_open()
        return self._started(
            self._session.create_shared_durable_consumer(topic, name, selector))

    def create_browser(self, queue: Queue, selector: str | None = None) -> QueueBrowser:
        """Look at a queue's messages without consuming them."""
        self._check_open()
        return self._session.create_browser(queue, selector)

    def unsubscribe(self, name: str) -> None:
        """Delete a durable subscription and the messages it holds."""
        self._check_open()
        self._session.unsubscribe(name)

    # -- acknowledgement and transactions ------------------------------------------
    def commit(self) -> None:
        """SESSION_TRANSACTED: consume what was received, publish what was sent."""
        self._check_open()
        self._session.commit()

    def rollback(self) -> None:
        """SESSION_TRANSACTED: redeliver what was received, discard what was sent."""
        self._check_open()
        self._session.rollback()

    def recover(self) -> None:
        """Redeliver every message delivered and not yet acknowledged."""
        self._check_open()
        self._session.recover()

    def acknowledge(self) -> None:
        """CLIENT_ACKNOWLEDGE: acknowledge every message this context delivered."""
        self._check_open()
        self._session.acknowledge()

    # -- internals ------------------------------------------------------------------
    def _started(self, consumer: MessageConsumer) -> JMSConsumer:
        if self._auto_start and not self._connection.started:
            self._connection.start()
        return JMSConsumer(consumer)

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateException(
                "the JMSContext is closed; create a new one with factory.create_context()")


class JMSProducer:
    """Sends bodies (or messages) to the destination named on each ``send``.

    The setters return the producer, so they chain; what they set holds for every later
    send: ``producer.set_priority(7).set_property("region", "EU").send(queue, "hi")``.
    Properties set here are added to each message sent (a Message passed to ``send``
    gets them too, over its own of the same name).
    """

    def __init__(self, session: Session, producer: MessageProducer) -> None:
        self._session = session
        self._producer = producer
        self._properties: dict[str, PropertyValue] = {}
        self._correlation_id: str | None = None
        self._jms_type: str | None = None
        self._reply_to: Destination | None = None
        self._completion: CompletionCallback | None = None

    def send(self, destination: Destination, body: Body) -> JMSProducer:
        """Send ``body`` to ``destination``: a str as a TextMessage, bytes as a
        BytesMessage, a mapping as a MapMessage, a Message as it is (None: a
        TextMessage without text). With :meth:`set_async` the call returns at once and
        the listener hears the outcome on a jmspy thread."""
        message = self._message(body)
        for name, value in self._properties.items():
            message.set_property(name, value)
        if self._correlation_id is not None:
            message.correlation_id = self._correlation_id
        if self._jms_type is not None:
            message.jms_type = self._jms_type
        if self._reply_to is not None:
            message.reply_to = self._reply_to
        self._producer.send(message, destination, completion_listener=self._completion)
        return self

    def _message(self, body: Body) -> Message:
        session = self._session
        if isinstance(body, Message):
            return body
        if body is None or isinstance(body, str):
            return session.create_text_message(body)
        if isinstance(body, bytes | bytearray | memoryview):
            return session.create_bytes_message(bytes(body))
        if isinstance(body, Mapping):
            return session.create_map_message(body)
        raise MessageFormatException(
            f"send() takes a str, bytes, a dict or a Message as the body, not "
            f"{type(body).__name__}; convert it (json.dumps for structured data)")

    # -- settings (each returns the producer) ---------------------------------------
    def set_delivery_mode(self, delivery_mode: int) -> JMSProducer:
        """DeliveryMode.PERSISTENT (the default) or NON_PERSISTENT."""
        self._producer.delivery_mode = delivery_mode
        return self

    def set_priority(self, priority: int) -> JMSProducer:
        """0 to 9 (default 4); higher is delivered first where the broker orders by it."""
        self._producer.priority = priority
        return self

    def set_time_to_live(self, time_to_live: float) -> JMSProducer:
        """Seconds a message stays deliverable; 0 (the default) never expires."""
        self._producer.time_to_live = time_to_live
        return self

    def set_delivery_delay(self, delivery_delay: float) -> JMSProducer:
        """Seconds the broker holds each message before it can be delivered."""
        self._producer.delivery_delay = delivery_delay
        return self

    def set_property(self, name: str, value: PropertyValue) -> JMSProducer:
        """A property for every message sent from now on (checked now, like a message's;
        None removes it)."""
        if value is None:
            self._properties.pop(name, None)
            return self
        TextMessage(properties={name: value})  # the message rules: a bad one raises here
        self._properties[name] = value
        return self

    def clear_properties(self) -> JMSProducer:
        self._properties.clear()
        return self

    def set_jms_correlation_id(self, correlation_id: str | None) -> JMSProducer:
        self._correlation_id = correlation_id
        return self

    def set_jms_type(self, jms_type: str | None) -> JMSProducer:
        self._jms_type = jms_type
        return self

    def set_jms_reply_to(self, reply_to: Destination | None) -> JMSProducer:
        self._reply_to = reply_to
        return self

    def set_async(self, completion_listener: CompletionCallback | None) -> JMSProducer:
        """Send asynchronously from now on: ``send`` returns at once and the listener
        (a CompletionListener, or ``f(message, exception_or_None)``) hears each outcome
        on the connection's notifier thread. None: synchronous again."""
        self._completion = completion_listener
        return self

    @property
    def delivery_mode(self) -> int:
        return self._producer.delivery_mode

    @property
    def priority(self) -> int:
        return self._producer.priority

    @property
    def time_to_live(self) -> float:
        return self._producer.time_to_live

    @property
    def delivery_delay(self) -> float:
        return self._producer.delivery_delay

    @property
    def properties(self) -> Mapping[str, PropertyValue]:
        return dict(self._properties)


class JMSConsumer:
    """Receives from one destination: messages, or their bodies typed.

    ``receive_body(str)`` is typed ``str | None`` (the body of a TextMessage, None when
    nothing came in time); a body of another type raises MessageFormatException and the
    message is not acknowledged (see :meth:`MessageConsumer.receive_body`).
    """

    def __init__(self, consumer: MessageConsumer) -> None:
        self._consumer = consumer

    def receive(self, timeout: float | None = None) -> Message | None:
        """The next message, waiting up to ``timeout`` seconds (None: for ever)."""
        return self._consumer.receive(timeout)

    def receive_no_wait(self) -> Message | None:
        return self._consumer.receive_no_wait()

    def receive_body(self, body_type: type[T], timeout: float | None = None) -> T | None:
        """The next message's body as ``body_type`` (str, bytes, dict or object)."""
        return self._consumer.receive_body(body_type, timeout)

    def receive_body_no_wait(self, body_type: type[T]) -> T | None:
        return self._consumer.receive_body_no_wait(body_type)

    def messages(self, timeout: float | None = None) -> Iterator[Message]:
        """As :meth:`MessageConsumer.messages` (``timeout``: the idle limit)."""
        return self._consumer.messages(timeout)

    def __iter__(self) -> Iterator[Message]:
        return self._consumer.messages()

    def set_message_listener(self, listener: ListenerType | None) -> None:
        """Deliver to ``listener`` (a callable, or an object with ``on_message``) on the
        session's dispatcher thread; None switches back to ``receive``."""
        self._consumer.set_message_listener(listener)

    @property
    def message_listener(self) -> ListenerType | None:
        return self._consumer.message_listener

    @property
    def message_selector(self) -> str | None:
        return self._consumer.selector

    @property
    def destination(self) -> Destination:
        return self._consumer.destination

    def flow_stats(self) -> FlowStats:
        """The underlying consumer's flow control (limit, why, live counters)."""
        return self._consumer.flow_stats()

    def close(self) -> None:
        self._consumer.close()

    @property
    def closed(self) -> bool:
        return self._consumer.closed

    def __enter__(self) -> JMSConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
