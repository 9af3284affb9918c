"""Messages: headers, typed properties, and Text / Bytes / Map bodies.

A message is writable until it is sent; a *received* message is read-only (JMS rule) until
``clear_body()`` / ``clear_properties()``. That rule is what lets the in-process transport
hand the same body and property objects to several topic subscribers without copying.

Header values use snake_case attributes (``msg.priority``); the JMS names
(``msg.JMSPriority``) are accepted as read aliases because that is what users of other JMS
clients type first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from enum import IntEnum
from operator import attrgetter
from typing import TYPE_CHECKING, Self, TypeVar

from . import twins
from .errors import (
    IllegalStateException,
    MessageEOFException,
    MessageFormatException,
    MessageNotWriteableException,
)
from .property_value import PropertyValue

if TYPE_CHECKING:
    from ._pure.message_record import FIELDS, MessageRecord
else:
    # The fields are a twin (typed C fields when compiled): jmspy/_pure/message_record.py.
    MessageRecord = twins.message_record.MessageRecord
    FIELDS = twins.message_record.FIELDS

__all__ = [
    "BytesMessage",
    "DeliveryMode",
    "MapMessage",
    "Message",
    "PropertyValue",
    "TextMessage",
]

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_N = TypeVar("_N", int, float)
_M = TypeVar("_M", bound="Message")
_SELECTOR_WORDS = frozenset(
    {"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE"}
)
_SETTABLE_JMSX = frozenset({"JMSXGroupID", "JMSXGroupSeq"})


class DeliveryMode(IntEnum):
    """JMS delivery modes: PERSISTENT survives a broker restart, NON_PERSISTENT need not.

    An ``IntEnum`` so that the JMS numbers (1, 2) keep working wherever an int is taken."""

    NON_PERSISTENT = 1
    PERSISTENT = 2


#: Names that passed _check_property_name (a pure function of the name), so a message
#: built with the same property names as the last one skips the per-character scan.
_VALID_NAMES: set[str] = set()
_MAX_VALID_NAMES = 4096
#: A tuple, not ``bool | str | float``: that expression builds a union object per call.
_SCALARS = (bool, str, float)


def _valid_property_name(name: object) -> str:
    """``name`` if it may be a property name (remembered), else MessageFormatException."""
    if type(name) is str and name in _VALID_NAMES:
        return name
    checked = _check_property_name(name)
    if len(_VALID_NAMES) >= _MAX_VALID_NAMES:
        _VALID_NAMES.clear()  # many generated names: start over, never grow unbounded
    _VALID_NAMES.add(checked)
    return checked


def _check_property_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise MessageFormatException(f"property name must be a non-empty str, got {name!r}")
    if not (name[0].isalpha() or name[0] in "_$") or not all(
        c.isalnum() or c in "_$" for c in name
    ):
        raise MessageFormatException(
            f"property name {name!r} is not a valid identifier: start with a letter, '_' or "
            "'$' and use only letters, digits, '_' and '$' (selectors must be able to name it)"
        )
    if name.upper() in _SELECTOR_WORDS:
        raise MessageFormatException(
            f"property name {name!r} is a selector keyword; choose another name"
        )
    if name.startswith("JMS") and not name.startswith("JMS_") and name not in _SETTABLE_JMSX:
        raise MessageFormatException(
            f"property name {name!r} is reserved: names starting with 'JMS' belong to the "
            "JMS headers and provider (only JMSXGroupID, JMSXGroupSeq and JMS_* may be set)"
        )
    return name


def _check_property_value(name: str, value: object) -> PropertyValue:
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, int):
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise MessageFormatException(
                f"property {name!r} = {value} does not fit a 64-bit signed integer"
            )
        return value
    raise MessageFormatException(
        f"property {name!r} has type {type(value).__name__}; JMS properties are bool, int, "
        "float, str or None (serialise other values into the body)"
    )


def _parsed_number(name: str, value: PropertyValue, convert: Callable[[str], _N],
                   kind: str) -> _N:
    """A property that is not already the wanted number, read by the JMS conversion
    rules: a string that parses; anything else, absent included, is a
    MessageFormatException naming the property, its value and ``kind``."""
    if isinstance(value, str):
        try:
            return convert(value)
        except ValueError:
            pass
    raise MessageFormatException(
        f"property {name!r} = {value!r} cannot be read as {kind} (JMS conversion rules)"
    )


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type[Message]) -> tuple[str, ...]:
    """The record's fields, then the slots ``cls``'s own classes add (BytesMessage's
    cursor), remembered per class."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        extra = [n for k in reversed(cls.__mro__) for n in k.__dict__.get("__slots__", ())]
        names = _FIELD_NAMES[cls] = tuple(dict.fromkeys([*FIELDS, *extra]))
    return names


def _restore(cls: type[_M], state: dict[str, object]) -> _M:
    """Unpickle what :meth:`Message.__reduce__` wrote."""
    message = cls.__new__(cls)
    for name, value in state.items():
        setattr(message, name, value)
    return message


class Message(MessageRecord):
    """A JMS message with no body: headers and properties only.

    The ``_acknowledger`` is set by the session that delivered the message; it implements
    ``acknowledge()`` according to the session's acknowledgement mode.
    """

    # Every field is the record's (declared once, in jmspy/_pure/message_record.py and its
    # compiled twin); subclasses add only what their body needs beyond ``_body``.
    __slots__ = ()

    _JMS_ALIASES: Mapping[str, str] = {
        "JMSMessageID": "message_id",
        "JMSTimestamp": "timestamp",
        "JMSCorrelationID": "correlation_id",
        "JMSReplyTo": "reply_to",
        "JMSDestination": "destination",
        "JMSDeliveryMode": "delivery_mode",
        "JMSExpiration": "expiration",
        "JMSPriority": "priority",
        "JMSRedelivered": "redelivered",
        "JMSType": "jms_type",
        "JMSDeliveryTime": "delivery_time",
        "JMSXDeliveryCount": "delivery_count",
    }

    def __init__(self, properties: Mapping[str, PropertyValue] | None = None) -> None:
        self.message_id = None
        self.timestamp = 0
        self.correlation_id = None
        self.reply_to = None
        self.destination = None
        self.delivery_mode = DeliveryMode.PERSISTENT
        self.expiration = 0
        self.priority = 4
        self.redelivered = False
        self.jms_type = None
        self.delivery_time = 0
        self.delivery_count = 0
        self._properties = {}
        self._props_read_only = False
        self._body_read_only = False
        self._acknowledger = None
        self._delivery_tag = -1
        self._body = None
        if properties:  # set_property's checks, in its order, without a call per property
            props = self._properties
            for key, value in properties.items():
                props[key] = _check_property_value(_valid_property_name(key), value)

    # The JMS names as read-only properties. Not a ``__getattr__`` fallback: a class with
    # one makes *every* attribute read of its instances go through a Python-level hook
    # (CPython cannot specialise slot reads for it), which cost about 8k of the 63k
    # instructions a vm:// message took end to end (callgrind).
    JMSMessageID = property(attrgetter("message_id"), doc="Alias of ``message_id``.")
    JMSTimestamp = property(attrgetter("timestamp"), doc="Alias of ``timestamp``.")
    JMSCorrelationID = property(attrgetter("correlation_id"), doc="Alias of ``correlation_id``.")
    JMSReplyTo = property(attrgetter("reply_to"), doc="Alias of ``reply_to``.")
    JMSDestination = property(attrgetter("destination"), doc="Alias of ``destination``.")
    JMSDeliveryMode = property(attrgetter("delivery_mode"), doc="Alias of ``delivery_mode``.")
    JMSExpiration = property(attrgetter("expiration"), doc="Alias of ``expiration``.")
    JMSPriority = property(attrgetter("priority"), doc="Alias of ``priority``.")
    JMSRedelivered = property(attrgetter("redelivered"), doc="Alias of ``redelivered``.")
    JMSType = property(attrgetter("jms_type"), doc="Alias of ``jms_type``.")
    JMSDeliveryTime = property(attrgetter("delivery_time"), doc="Alias of ``delivery_time``.")
    JMSXDeliveryCount = property(attrgetter("delivery_count"), doc="Alias of ``delivery_count``.")

    # -- properties -------------------------------------------------------------------
    def set_property(self, name: str, value: PropertyValue) -> None:
        """Set a typed property (bool, int, float, str or None)."""
        if self._props_read_only:
            raise MessageNotWriteableException(
                "the properties of a received message are read-only; call "
                "clear_properties() first to write new ones"
            )
        self._properties[name] = _check_property_value(_valid_property_name(name), value)

    def get_string_property(self, name: str) -> str | None:
        value = self.get_property(name)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def get_int_property(self, name: str) -> int:
        value = self.get_property(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return _parsed_number(name, value, int, "an int")

    def get_float_property(self, name: str) -> float:
        value = self.get_property(name)
        if isinstance(value, float | int) and not isinstance(value, bool):
            return float(value)
        return _parsed_number(name, value, float, "a float")

    def get_bool_property(self, name: str) -> bool:
        value = self.get_property(name)
        if isinstance(value, bool):
            return value
        if value is None or isinstance(value, str):
            return isinstance(value, str) and value.lower() == "true"
        raise MessageFormatException(
            f"property {name!r} = {value!r} cannot be read as a bool (JMS conversion rules)"
        )

    def property_exists(self, name: str) -> bool:
        return name in self._properties

    @property
    def properties(self) -> Mapping[str, PropertyValue]:
        """A read-only view of the properties (use set_property to change them)."""
        from types import MappingProxyType

        return MappingProxyType(self._properties)

    def property_names(self) -> Iterator[str]:
        return iter(list(self._properties))

    def clear_properties(self) -> None:
        """Remove all properties and make them writable again."""
        self._properties = {}
        self._props_read_only = False

    # -- body ---------------------------------------------------------------------------
    def clear_body(self) -> None:
        """Empty the body and make it writable again."""
        self._body_read_only = False

    def _check_writable_body(self) -> None:
        if self._body_read_only:
            raise MessageNotWriteableException(
                "the body of a received message is read-only; call clear_body() first"
            )

    def body_size(self) -> int:
        """Approximate body size in bytes (for flow control and limits)."""
        return 0

    def copy(self) -> Message:
        """A writable copy to send on (a bridge, a dead-letter step): same body, headers
        and properties, none of it read-only, bound to no session (acknowledging it is
        an error). The message it was made from is untouched."""
        twin = self.__copy__()
        self._copy_body_to(twin)
        twin._properties = dict(self._properties)
        twin._props_read_only = twin._body_read_only = False
        twin._acknowledger = None
        twin._delivery_tag = -1
        return twin

    def _copy_body_to(self, twin: Message) -> None:
        """Give ``twin`` its own body where the body is mutable (subclasses)."""

    def __copy__(self: _M) -> _M:
        """A shallow copy: every field shared (``copy.copy``, and the start of
        :meth:`copy`). Written out rather than left to the default protocol, which the
        compiled record (a C type) does not take part in."""
        cls = type(self)
        twin = cls.__new__(cls)
        for name in _field_names(cls):
            setattr(twin, name, getattr(self, name))
        return twin

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle as the class and its fields, the same for both record twins."""
        return (_restore, (type(self), {n: getattr(self, n) for n in _field_names(type(self))}))

    # -- acknowledgement --------------------------------------------------------------
    def acknowledge(self: Self) -> None:
        """Acknowledge per the session's mode.

        CLIENT_ACKNOWLEDGE: every message the session has delivered so far;
        INDIVIDUAL_ACKNOWLEDGE: this message only; other modes: nothing to do.
        """
        ack = self._acknowledger
        if ack is None:
            if self._props_read_only:
                return
            raise IllegalStateException(
                "acknowledge() was called on a message that was not received from a session"
            )
        ack(self)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} id={self.message_id} dest={self.destination} "
            f"priority={self.priority} redelivered={self.redelivered}>"
        )


def selector_getter(message: Message) -> Callable[[str], object]:
    """The identifier lookup a selector needs, over a client-side Message.

    For transports whose broker cannot filter (MQTT, STOMP to RabbitMQ): header names
    resolve to the headers (JMSDeliveryMode as 'PERSISTENT'/'NON_PERSISTENT', as the JMS
    specification compares it), everything else to the properties.
    """

    def get(name: str) -> object:
        if name.startswith("JMS"):
            attr = Message._JMS_ALIASES.get(name)
            if attr is not None:
                value = getattr(message, attr)
                if name == "JMSDeliveryMode":
                    return "PERSISTENT" if value == DeliveryMode.PERSISTENT else "NON_PERSISTENT"
                return value
        return message._properties.get(name)

    return get


def finish_received(message: Message, properties: dict[str, PropertyValue]) -> Message:
    """Complete a message a transport built for delivery: first delivery, read-only.

    Transports build received messages with ``__new__`` (no validation: the values came
    from a broker); this sets the fields every one of them shares.
    """
    message.redelivered = False
    message.delivery_count = 1
    message._properties = properties
    message._props_read_only = True
    message._body_read_only = True
    message._acknowledger = None
    message._delivery_tag = -1
    return message


class TextMessage(Message):
    """A message whose body is a str."""

    __slots__ = ()
    _body: str | None

    def __init__(
        self, text: str | None = None, properties: Mapping[str, PropertyValue] | None = None
    ) -> None:
        super().__init__(properties)
        if text is not None and not isinstance(text, str):
            raise MessageFormatException(
                f"TextMessage text must be a str, got {type(text).__name__}; use a "
                "BytesMessage for binary data"
            )
        self._body = text

    @property
    def text(self) -> str | None:
        return self._body

    @text.setter
    def text(self, value: str | None) -> None:
        self._check_writable_body()
        if value is not None and not isinstance(value, str):
            raise MessageFormatException(f"text must be a str, got {type(value).__name__}")
        self._body = value

    def clear_body(self) -> None:
        super().clear_body()
        self._body = None

    def body_size(self) -> int:
        return len(self._body) if self._body else 0


class BytesMessage(Message):
    """A message whose body is bytes, with a JMS-style read cursor.

    ``body`` gives the whole payload; ``read_bytes(n)`` reads from a cursor that
    ``reset()`` rewinds, for code ported from JMS's stream-style API.
    """

    __slots__ = ("_pos",)  # the read cursor; the payload is the record's ``_body``
    _body: bytes

    def __init__(
        self, data: bytes | None = None, properties: Mapping[str, PropertyValue] | None = None
    ) -> None:
        super().__init__(properties)
        if data is not None and not isinstance(data, bytes | bytearray | memoryview):
            raise MessageFormatException(
                f"BytesMessage data must be bytes, got {type(data).__name__}"
            )
        self._body = bytes(data) if data is not None else b""
        self._pos = 0

    @property
    def body(self) -> bytes:
        return self._body

    def write_bytes(self, data: bytes) -> None:
        self._check_writable_body()
        self._body += bytes(data)

    def read_bytes(self, n: int = -1) -> bytes:
        if self._pos >= len(self._body) and n != 0:
            raise MessageEOFException("end of BytesMessage body reached; call reset() to reread")
        end = len(self._body) if n < 0 else self._pos + n
        chunk = self._body[self._pos : end]
        self._pos += len(chunk)
        return chunk

    def reset(self) -> None:
        self._pos = 0

    def get_body_length(self) -> int:
        return len(self._body)

    def clear_body(self) -> None:
        super().clear_body()
        self._body = b""
        self._pos = 0

    def body_size(self) -> int:
        return len(self._body)


class MapMessage(Message):
    """A message whose body maps str names to JMS property-typed values (plus bytes)."""

    __slots__ = ()
    _body: dict[str, PropertyValue | bytes]

    def __init__(
        self,
        values: Mapping[str, PropertyValue | bytes] | None = None,
        properties: Mapping[str, PropertyValue] | None = None,
    ) -> None:
        super().__init__(properties)
        self._body = {}
        if values:
            for key, value in values.items():
                self.set(key, value)

    def _copy_body_to(self, twin: Message) -> None:
        assert isinstance(twin, MapMessage)
        twin._body = dict(self._body)

    def set(self, name: str, value: PropertyValue | bytes) -> None:
        self._check_writable_body()
        if not isinstance(name, str) or not name:
            raise MessageFormatException(f"map names must be non-empty str, got {name!r}")
        if isinstance(value, bytes):
            self._body[name] = value
        else:
            self._body[name] = _check_property_value(name, value)

    def get(self, name: str, default: PropertyValue | bytes = None) -> PropertyValue | bytes:
        return self._body.get(name, default)

    def __getitem__(self, name: str) -> PropertyValue | bytes:
        return self._body[name]

    def __setitem__(self, name: str, value: PropertyValue | bytes) -> None:
        self.set(name, value)

    def __contains__(self, name: object) -> bool:
        return name in self._body

    def item_exists(self, name: str) -> bool:
        return name in self._body

    @property
    def map(self) -> Mapping[str, PropertyValue | bytes]:
        from types import MappingProxyType

        return MappingProxyType(self._body)

    def clear_body(self) -> None:
        super().clear_body()
        self._body = {}

    def body_size(self) -> int:
        return sum(len(k) + len(str(v)) for k, v in self._body.items())
