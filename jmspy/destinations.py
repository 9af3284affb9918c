"""Destinations: queues (one consumer gets each message) and topics (every subscription does).

Destinations are values: two ``Queue("orders")`` are equal and hash alike, so they can key
dicts. Names are validated once here, at the edge, so the broker and transports can trust
them.

Destination options (ActiveMQ's destination-options syntax): ``Queue("orders?x-queue-type=
quorum&consumer.prefetchSize=10")`` is the queue ``orders`` with two options, a broker's
queue arguments or consumer settings. They are parsed here (percent-decoded, each name
once) and ride along with the destination; they are not part of its identity:
``Queue("orders?x-max-length=5") == Queue("orders")``, because both name the same queue on
the broker. Which options a broker takes, and what each becomes on the wire, is the
transports' business (``jmspy.transports.destination_options``); nothing here knows a
broker.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from .errors import IllegalStateException, InvalidDestinationException

__all__ = ["Destination", "DestinationOptions", "Queue", "TemporaryQueue", "TemporaryTopic",
           "Topic", "destination_from_uri", "parse_options"]

#: How the name of a temporary topic starts (``Session.create_temporary_topic``).
TEMP_TOPIC_PREFIX = "temp-topic."

MAX_NAME_LENGTH = 255


def _check_name(kind: str, name: object) -> str:
    if not isinstance(name, str):
        raise InvalidDestinationException(
            f"{kind} name must be a str, got {type(name).__name__}: {name!r}"
        )
    if not name:
        raise InvalidDestinationException(f"{kind} name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidDestinationException(
            f"{kind} name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}"
        )
    bad = next((c for c in name if c.isspace() or ord(c) < 32 or c == "\x7f"), None)
    if bad is not None:
        raise InvalidDestinationException(
            f"{kind} name {name!r} contains {bad!r}; use letters, digits and . - _ / : only "
            "(no whitespace or control characters)"
        )
    return name


class DestinationOptions(Mapping[str, str]):
    """A destination's options: an immutable, ordered ``{name: value}`` of strings.

    Hashable (a transport caches what a set of options becomes on the wire) and
    picklable (destinations travel to Spark executors)."""

    __slots__ = ("_items",)
    _items: tuple[tuple[str, str], ...]

    def __init__(self, items: tuple[tuple[str, str], ...] = ()) -> None:
        object.__setattr__(self, "_items", items)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("DestinationOptions are immutable")

    def __reduce__(self) -> tuple[type[DestinationOptions], tuple[tuple[tuple[str, str], ...]]]:
        return DestinationOptions, (self._items,)

    def __getitem__(self, key: str) -> str:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DestinationOptions):
            return self._items == other._items
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def query(self) -> str:
        """The options as a destination-options query (``a=1&b=2``, percent-encoded)."""
        return "&".join(f"{_quote(k)}={_quote(v, safe='=')}" for k, v in self._items)

    def __repr__(self) -> str:
        return f"DestinationOptions({dict(self._items)!r})"


NO_OPTIONS = DestinationOptions()

_HEX = frozenset("0123456789abcdefABCDEF")
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_~")


def _quote(text: str, safe: str = "") -> str:
    """Percent-encode all but unreserved URL characters (and ``safe``), as UTF-8.
    (Not urllib: this module stays free of network modules, tests/test_sans_io_imports.py.)"""
    return "".join(c if c in _PLAIN or c in safe else "".join(f"%{b:02X}" for b in c.encode())
                   for c in text)


def _unquote(text: str) -> str:
    """Decode ``%XX`` sequences (UTF-8). Raises ValueError for a ``%`` not followed by two
    hex digits and UnicodeDecodeError for bytes that are not UTF-8."""
    if "%" not in text:
        return text
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%":
            pair = text[i + 1:i + 3]
            if len(pair) != 2 or not _HEX.issuperset(pair):
                raise ValueError(pair)
            out.append(int(pair, 16))
            i += 3
        else:
            out += c.encode()
            i += 1
    return out.decode("utf-8")


def _option_value(kind: str, name: str, key: str, value: object) -> str:
    if isinstance(value, bool):  # before int: True is an int
        return "true" if value else "false"
    if isinstance(value, int | str):
        text = str(value)
        if text:
            return text
    raise InvalidDestinationException(
        f"{kind} {name!r}: destination option {key!r} = {value!r} is not usable; give a "
        "non-empty string, an int or a bool")


def parse_options(kind: str, text: str,
                  extra: Mapping[str, object] | None = None) -> tuple[str, DestinationOptions]:
    """Split ``"orders?a=1&b=x%20y"`` into the name and its options, merged with ``extra``
    (the ``options=`` keyword). Names and values are percent-decoded; each option may be
    given once. Everything malformed is refused, saying what is wrong: nothing is
    guessed or dropped."""
    name, sep, query = text.partition("?")
    items: dict[str, str] = {}
    if sep:
        if not query:
            raise InvalidDestinationException(
                f"{kind} {text!r} ends with '?' and no options; remove the '?' or add "
                "name=value options (e.g. 'orders?x-queue-type=quorum')")
        for piece in query.split("&"):
            key, eq, raw = piece.partition("=")
            if not piece:
                raise InvalidDestinationException(
                    f"{kind} {text!r} has an empty option (two '&' in a row, or a '&' at "
                    "an end); separate name=value options with single '&'")
            if not eq or not key:
                raise InvalidDestinationException(
                    f"{kind} {text!r}: option {piece!r} is not name=value (e.g. "
                    "'x-max-length=1000')")
            try:
                key, value = _unquote(key), _unquote(raw)
            except UnicodeDecodeError:
                raise InvalidDestinationException(
                    f"{kind} {text!r}: option {piece!r} percent-encodes bytes that are not "
                    "UTF-8; encode the text as UTF-8 before percent-encoding it") from None
            except ValueError:
                raise InvalidDestinationException(
                    f"{kind} {text!r}: option {piece!r} has a '%' not followed by two hex "
                    "digits; write a literal '%' as %25") from None
            if not value:
                raise InvalidDestinationException(
                    f"{kind} {text!r}: option {key!r} has an empty value; give it one or "
                    "leave the option out")
            if key in items:
                raise InvalidDestinationException(
                    f"{kind} {text!r} gives option {key!r} twice ({items[key]!r} and "
                    f"{value!r}); give each option once")
            items[key] = value
    for extra_key, extra_value in (extra or {}).items():
        if not isinstance(extra_key, str) or not extra_key:
            raise InvalidDestinationException(
                f"{kind} {name!r}: destination option names are non-empty strings, got "
                f"{extra_key!r}")
        if extra_key in items:
            raise InvalidDestinationException(
                f"{kind} {name!r} gets option {extra_key!r} both in its name and in "
                "options=; give it once")
        items[extra_key] = _option_value(kind, name, extra_key, extra_value)
    return name, DestinationOptions(tuple(items.items())) if items else NO_OPTIONS


@dataclass(frozen=True, slots=True)
class Destination:
    """Base of Queue and Topic; ``kind`` is "queue" or "topic".

    ``options``: the destination options (see the module docstring), from the name's
    ``?name=value&...`` part or passed as a mapping; not compared: a destination is its
    name."""

    name: str
    options: DestinationOptions = field(default=NO_OPTIONS, compare=False)
    kind: ClassVar[str] = "destination"

    def __post_init__(self) -> None:
        options, name = self.options, self.name
        given = type(options) is not DestinationOptions
        if given and not isinstance(options, Mapping):
            raise InvalidDestinationException(
                f"{self.kind} options must be a mapping of name to value, got "
                f"{type(options).__name__}: {options!r}")
        if isinstance(name, str) and (given or "?" in name):
            name, parsed = parse_options(self.kind, name, options)
            object.__setattr__(self, "name", name)
            object.__setattr__(self, "options", parsed)
        _check_name(self.kind, self.name)

    def with_options_text(self) -> str:
        """The name with its options, as written: ``orders?x-queue-type=quorum``."""
        return f"{self.name}?{self.options.query()}" if self.options else self.name

    def __str__(self) -> str:
        return f"{self.kind}://{self.name}"


@dataclass(frozen=True, slots=True)
class Queue(Destination):
    """A point-to-point destination: each message goes to one consumer."""

    kind: ClassVar[str] = "queue"


@dataclass(frozen=True, slots=True)
class Topic(Destination):
    """A publish/subscribe destination: each subscription gets every message."""

    kind: ClassVar[str] = "topic"


class TemporaryOwner(Protocol):
    """What a temporary destination needs of the connection that created it (the
    :class:`~jmspy.connection.Connection`): a Protocol, so that destinations sit below
    connections and never import them."""

    def _delete_temporary_queue(self, queue: TemporaryQueue) -> None: ...

    def _delete_temporary_topic(self, topic: TemporaryTopic) -> None: ...


def _creator(destination: TemporaryQueue | TemporaryTopic,
             owner: TemporaryOwner | None) -> TemporaryOwner:
    """The connection that created ``destination``: only it may delete it."""
    if owner is None:
        raise IllegalStateException(
            f"{destination} was not created by this process's connection; only the "
            f"connection that created a temporary {destination.kind} can delete it")
    return owner


class TemporaryQueue(Queue):
    """A queue that lives as long as the connection that created it.

    Only that connection may consume from it; anyone who learns its name (from
    JMSReplyTo) may send to it. ``delete()`` removes it early.
    """

    __slots__ = ("_connection",)
    _connection: TemporaryOwner | None

    def __init__(self, name: str, connection: TemporaryOwner | None = None) -> None:
        super().__init__(name)
        object.__setattr__(self, "_connection", connection)

    def __str__(self) -> str:
        # The broker names temporary queues "temp-queue://..." already.
        return self.name if "://" in self.name else f"temp-queue://{self.name}"

    def delete(self) -> None:
        """Delete the queue now; sending to it afterwards fails."""
        _creator(self, self._connection)._delete_temporary_queue(self)


class TemporaryTopic(Topic):
    """A topic that lives as long as the connection that created it.

    Only that connection may subscribe to it; anyone who learns its name (from
    JMSReplyTo) may publish to it. ``delete()`` ends it early. Its name is unique
    (``temp-topic.<hex>``) and the creating connection keeps the rules: a broker sees an
    ordinary topic, which holds nothing while no one subscribes.
    """

    __slots__ = ("_connection",)
    _connection: TemporaryOwner | None

    def __init__(self, name: str, connection: TemporaryOwner | None = None) -> None:
        super().__init__(name)
        object.__setattr__(self, "_connection", connection)

    def __str__(self) -> str:
        return f"temp-topic://{self.name.removeprefix(TEMP_TOPIC_PREFIX)}"

    def delete(self) -> None:
        """Delete the topic now; subscribing to it or sending to it afterwards fails.
        Refused while a consumer of this connection is still on it (close it first)."""
        _creator(self, self._connection)._delete_temporary_topic(self)


def destination_from_uri(uri: str) -> Destination:
    """Parse ``queue://name`` / ``topic://name`` (as JMSReplyTo travels) into a Destination."""
    kind, sep, name = uri.partition("://")
    if not sep:
        raise InvalidDestinationException(
            f"destination {uri!r} must look like 'queue://NAME' or 'topic://NAME'"
        )
    if kind == "queue":
        return Queue(name)
    if kind == "topic":
        return Topic(name)
    if kind == "temp-queue":
        return TemporaryQueue(uri)  # the broker's own name for it includes the scheme
    if kind == "temp-topic":
        return TemporaryTopic(f"{TEMP_TOPIC_PREFIX}{name}")
    raise InvalidDestinationException(
        f"destination {uri!r} has unknown kind {kind!r}; use 'queue://' or 'topic://'"
    )
