"""Destination options per broker: which ones each target takes and what each becomes.

``session.create_queue("orders?x-queue-type=quorum")`` gives the queue an option; here it
is checked against the target the connection is on (the same columns as the capability
matrix, :mod:`.capabilities`) and turned into what that broker understands:

* a STOMP header on SEND and SUBSCRIBE (RabbitMQ's queue arguments: its STOMP plugin
  declares the queue with them on every frame, and refuses a frame whose arguments differ
  from the queue's: ``PRECONDITION_FAILED - inequivalent arg``), or on SUBSCRIBE only
  (ActiveMQ's ``activemq.*`` consumer headers, RabbitMQ's ``x-stream-offset``);
* a setting the transport applies itself: the consumer's window (``consumer.prefetchSize``
  becomes the destination's flow limit, so the effective limit is the lower of it and
  ``imqConsumerFlowLimit``, as for a destination's ``consumerFlowLimit``), or, in-process,
  the queue's ring size and expiration in the broker.

An option no broker knows is refused with the list of those this target knows; one that
another broker knows but this one cannot carry is refused naming this broker. Nothing is
dropped. What a set of options resolves to is cached (they are few per application).
No I/O here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from jmspy.capabilities import Cell, Feature, RefusedFeatureException, native, refused
from jmspy.destinations import Destination, DestinationOptions, Queue
from jmspy.errors import InvalidDestinationException
from jmspy.wire.headers import MAX_MESSAGES

__all__ = ["OPTION_TARGETS", "OptionSpec", "Resolved", "cell", "known_options", "resolve"]

#: what a value check returns: the value as the wire carries it
Check = Callable[[str], str]


def _int(low: int, high: int | None = None) -> Check:
    def check(value: str) -> str:
        try:
            n = int(value)
        except ValueError:
            n = low - 1
        if n < low or (high is not None and n > high):
            span = f"from {low} to {high}" if high is not None else f">= {low}"
            raise ValueError(f"must be a whole number {span}")
        return str(n)
    check.__doc__ = f"an integer >= {low}" + (f" and <= {high}" if high is not None else "")
    return check


def _choice(*allowed: str) -> Check:
    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value
    return check


def _bool(value: str) -> str:
    low = value.lower()
    if low not in ("true", "false"):
        raise ValueError("must be true or false")
    return low


def _text(value: str) -> str:
    return value


def _stream_offset(value: str) -> str:
    """RabbitMQ's STOMP plugin reads ``first``, ``last``, ``next``, ``offset=N`` and
    ``timestamp=SECONDS`` and silently ignores anything else (the consumer would then start
    at ``next``): so the value is checked here. A bare number is an offset."""
    if value in ("first", "last", "next"):
        return value
    kind, eq, number = value.partition("=")
    if not eq:
        kind, number = "offset", value
    if kind in ("offset", "timestamp") and number.isdigit():
        return f"{kind}={int(number)}"
    raise ValueError("must be first, last, next, an offset (N or offset=N) or "
                     "timestamp=SECONDS (POSIX seconds)")


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option on one target.

    ``header``: the STOMP header it becomes (for a ``setting``, the header that carries
    the setting's effect, sent by the transport; "" = nothing on the wire).
    ``on_send``: also carried on SEND (a queue argument), else SUBSCRIBE only.
    ``setting``: the transport-applied setting (``flow_limit``, ``ring_size``,
    ``expiration_ms``). ``queues_only``: refused on a Topic.
    """

    name: str
    check: Check
    how: str
    header: str = ""
    on_send: bool = False
    setting: str = ""
    queues_only: bool = True


@dataclass(frozen=True, slots=True)
class Resolved:
    """What one destination's options become on one target."""

    send_headers: Mapping[str, str] = field(default_factory=dict)
    subscribe_headers: Mapping[str, str] = field(default_factory=dict)
    #: the destination's consumer flow limit (``consumer.prefetchSize``), None = none
    flow_limit: int | None = None
    #: in-process broker: the queue's ring size and queue expiration to set
    ring_size: int | None = None
    expiration_ms: int | None = None
    #: the most messages the consumer is to be sent in all (``consumer.maxMessages``),
    #: where the transport enforces it itself; None = no end
    max_messages: int | None = None


_PREFETCH_HOW = "the destination's consumer flow limit: the lower of it and " \
    "imqConsumerFlowLimit is the window"


def _prefetch(window_header: str) -> OptionSpec:
    """``consumer.prefetchSize``: the consumer's window, which the transport sends in
    ``window_header`` (its usual window header) as the lower of the two limits."""
    return OptionSpec("consumer.prefetchSize", _int(0), _PREFETCH_HOW, header=window_header,
                      setting="flow_limit", queues_only=False)


def _rabbit_arg(name: str, check: Check, how: str) -> OptionSpec:
    return OptionSpec(name, check, how, header=name, on_send=True)


_RABBITMQ: Final = (
    _rabbit_arg("x-queue-type", _choice("classic", "quorum", "stream"),
                "queue type: classic, quorum or stream (streams: consumers need "
                "`x-stream-offset` to read old messages)"),
    _rabbit_arg("x-max-length", _int(0), "most ready messages; the oldest are dropped "
                "(or dead-lettered) beyond it"),
    _rabbit_arg("x-max-length-bytes", _int(0), "most bytes of ready message bodies"),
    _rabbit_arg("x-message-ttl", _int(0), "per-queue message TTL in ms (the lower of it "
                "and a message's own time to live applies)"),
    _rabbit_arg("x-expires", _int(1), "the queue is deleted after this many ms unused"),
    _rabbit_arg("x-max-priority", _int(1, 255), "a priority queue with priorities up to N"),
    _rabbit_arg("x-dead-letter-exchange", _text, "exchange for dropped and expired messages"),
    _rabbit_arg("x-dead-letter-routing-key", _text, "routing key for dead-lettered messages"),
    OptionSpec("x-stream-offset", _stream_offset, "where a stream consumer starts: first, "
               "last, next, an offset or timestamp=SECONDS (needs x-queue-type=stream)",
               header="x-stream-offset"),
    _prefetch("prefetch-count"),
)

_ACTIVEMQ: Final = (
    _prefetch("activemq.prefetchSize"),
    OptionSpec("consumer.exclusive", _bool, "exclusive consumer: the broker sends the "
               "queue to this consumer alone while it lives", header="activemq.exclusive",
               queues_only=False),
    OptionSpec("consumer.priority", _int(0, 127), "consumer priority: the broker prefers "
               "higher ones", header="activemq.priority", queues_only=False),
)

_CLASSIC_ONLY: Final = OptionSpec(
    "x-queue-type", _choice("classic"), "`classic` only (what its queues are)")

def _max_messages(header: str = "") -> OptionSpec:
    """``consumer.maxMessages``: the most messages the consumer is sent in all, carried
    in ``header`` where the broker enforces it, else capped by the transport itself."""
    return OptionSpec("consumer.maxMessages", _int(1), "the most messages the consumer is "
                      "sent in all: its window is not refilled past them (a reader that "
                      "wants N gets N, and nothing sits prefetched)", header=header,
                      setting="" if header else "max_messages", queues_only=False)


_EMBEDDED: Final = (
    _prefetch(""),
    _max_messages(),
    _CLASSIC_ONLY,
    OptionSpec("x-max-length", _int(1), "ring size: the head-most ready message is dropped "
               "when a send finds the queue full (RabbitMQ's drop-head)", setting="ring_size"),
    OptionSpec("ring-size", _int(1), "the queue's ring size (as `x-max-length`)",
               setting="ring_size"),
    OptionSpec("x-message-ttl", _int(1), "queue expiration in ms (`expiration-ms`, model "
               "`earliest`: the lower of it and a message's own time to live)",
               setting="expiration_ms"),
)

_JMSPY_STOMP: Final = (
    _prefetch("jmspy-flow-limit"), _CLASSIC_ONLY, _max_messages(MAX_MESSAGES),
)

#: (transport, matrix column) -> the options that target takes, and the broker's name
OPTION_TARGETS: Final[dict[tuple[str, str], tuple[str, tuple[OptionSpec, ...]]]] = {
    ("vm", "embedded"): ("the in-process broker", _EMBEDDED),
    ("stomp", "jmspy"): ("jmspy broker", _JMSPY_STOMP),
    ("stomp", "activemq"): ("ActiveMQ 5", _ACTIVEMQ),
    ("stomp", "rabbitmq"): ("RabbitMQ", _RABBITMQ),
}

#: every option some target knows, and who knows it (for "known elsewhere" refusals)
_OWNERS: Final[dict[str, list[str]]] = {}
for _broker, _specs in OPTION_TARGETS.values():
    for _spec in _specs:
        _OWNERS.setdefault(_spec.name, []).append(_broker)

#: What to do instead, where a broker lacks an option another one has.
_INSTEAD: Final = {
    ("stomp", "jmspy"): "jmspy broker takes queue settings from its configuration, not "
    "from clients: set ring-size / expiration-ms under [address-settings.\"NAME\"] in its "
    "TOML file (or use vm://, where the client may set them)",
    ("vm", "embedded"): "the in-process broker has no such feature; leave the option out",
    ("stomp", "activemq"): "configure the queue in ActiveMQ (a destination policy in "
    "activemq.xml) and leave the option out",
    ("stomp", "rabbitmq"): "RabbitMQ's STOMP plugin has no header for it; leave the "
    "option out (a RabbitMQ policy may do the same)",
}
_QUORUM_INSTEAD: Final = "it is a single node with classic queues only; leave " \
    "x-queue-type out (or use classic) when running against it"


def known_options(transport: str, key: str) -> list[str]:
    """The names of the options ``transport``/``key`` takes (sorted; [] = none)."""
    target = OPTION_TARGETS.get((transport, key))
    return sorted(s.name for s in target[1]) if target else []


def cell(transport: str, key: str) -> Cell:
    """The capability matrix's DESTINATION_OPTIONS cell for a target."""
    names = known_options(transport, key)
    if names:
        return native(", ".join(f"`{n}`" for n in names))
    if transport == "mqtt":
        return refused("MQTT has no queue arguments or consumer options",
                       "configure the broker, or use stomp:// to RabbitMQ or ActiveMQ")
    return refused("no destination options known for this broker",
                   "configure the queue on the broker and leave the options out")


def resolve(transport: str, key: str, destination: Destination, *, where: str) -> Resolved:
    """What ``destination``'s options become on the target, or the error that refuses
    them (see the module docstring). ``where`` (server and host:port) goes into errors."""
    options = destination.options
    if not options:
        return _NONE
    try:
        return _resolve(transport, key, isinstance(destination, Queue), options)
    except _Refusal as why:
        raise why.error(destination, where) from None


_NONE: Final = Resolved()


class _Refusal(Exception):
    """Raised inside the cached resolver (which knows no destination or address)."""

    def __init__(self, kind: str, text: str, feature_target: tuple[str, str] | None = None):
        super().__init__(text)
        self.kind, self.text, self.feature_target = kind, text, feature_target

    def error(self, destination: Destination, where: str) -> Exception:
        text = f"{destination} ({where}): {self.text}"
        if self.feature_target is None:
            return InvalidDestinationException(text)
        transport, key = self.feature_target
        return RefusedFeatureException(text, feature=Feature.DESTINATION_OPTIONS,
                                       transport=transport, target=key)


@functools.lru_cache(maxsize=256)
def _resolve(transport: str, key: str, is_queue: bool,
             options: DestinationOptions) -> Resolved:
    target = OPTION_TARGETS.get((transport, key))
    if target is None:
        c = cell(transport, key)
        raise _Refusal("refused", f"destination options ({', '.join(options)}) are not "
                       f"supported by the {transport}:// transport on this broker: {c.how}; "
                       f"{c.instead}", (transport, key))
    broker, specs = target
    by_name = {s.name: s for s in specs}
    send: dict[str, str] = {}
    subscribe: dict[str, str] = {}
    settings: dict[str, int] = {}
    for name, value in options.items():
        spec = by_name.get(name)
        if spec is None:
            owners = _OWNERS.get(name)
            if owners is None:
                raise _Refusal("unknown", f"unknown destination option {name!r} for the "
                               f"{transport}:// transport on {broker}; the options it takes "
                               f"are {', '.join(sorted(by_name))}")
            raise _Refusal("refused", f"destination option {name!r} (an option of "
                           f"{' and '.join(owners)}) is not supported by the {transport}:// "
                           f"transport on {broker}; "
                           f"{_INSTEAD.get((transport, key), 'leave the option out')}",
                           (transport, key))
        try:
            wire = spec.check(value)
        except ValueError as exc:
            if spec is _CLASSIC_ONLY:
                raise _Refusal("refused", f"x-queue-type={value} is not supported by the "
                               f"{transport}:// transport on {broker}: {_QUORUM_INSTEAD}",
                               (transport, key)) from None
            raise _Refusal("bad", f"destination option {name}={value!r} {exc}") from None
        if spec.queues_only and not is_queue:
            raise _Refusal("bad", f"destination option {name!r} is a queue's; a topic "
                           "cannot take it (use a Queue)")
        if spec.setting:
            settings[spec.setting] = int(wire)
        if spec.header and not spec.setting:
            subscribe[spec.header] = wire
            if spec.on_send:
                send[spec.header] = wire
    if "x-stream-offset" in options and options.get("x-queue-type") != "stream":
        raise _Refusal("bad", "x-stream-offset reads a stream: give x-queue-type=stream "
                       "too (RabbitMQ refuses a queue declared with other arguments than "
                       "it has)")
    return Resolved(send, subscribe, settings.get("flow_limit"), settings.get("ring_size"),
                    settings.get("expiration_ms"), settings.get("max_messages"))


# -- docs/destination-options.md ---------------------------------------------------------
BEGIN: Final = "<!-- destination options: generated, do not edit -->"
END: Final = "<!-- end of destination options -->"


def _carried(spec: OptionSpec) -> str:
    if spec.setting == "flow_limit":
        return "the consumer window" + (f" (`{spec.header}`)" if spec.header else "")
    if spec.setting == "max_messages":
        return "the consumer's credit, capped by the transport"
    if spec.setting:
        return f"the queue's `{spec.setting.replace('_', '-')}`, set in the broker"
    if not spec.header:
        return "nothing (accepted: it is what the broker does)"
    return f"`{spec.header}` on " + ("SEND and SUBSCRIBE" if spec.on_send else "SUBSCRIBE")


def render_markdown() -> str:
    """One table per target: each option, what it becomes, what it means."""
    out: list[str] = []
    for (transport, _key), (broker, specs) in OPTION_TARGETS.items():
        out += [f"**{transport}:// {broker}**", "",
                "| option | carried as | meaning | on |", "| --- | --- | --- | --- |"]
        for s in specs:
            where = "queues" if s.queues_only else "queues and topics"
            out.append(f"| `{s.name}` | {_carried(s)} | {s.how} | {where} |")
        out.append("")
    return "\n".join(out)


def replace_block(doc: str, begin: str, end: str, body: str) -> str:
    """``doc`` with the text between the ``begin`` and ``end`` markers replaced by ``body``.

    Shared by the generated blocks of docs/ (these tables and the capability matrix), so
    that each regenerates only its own block and a document missing one is refused."""
    head, sep, rest = doc.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise ValueError(f"the document has no {begin!r} ... {end!r} block")
    return f"{head}{begin}\n{body}{end}{tail}"


def rewrite(doc: str) -> str:
    """``doc`` with the text between the BEGIN and END markers replaced by the tables."""
    return replace_block(doc, BEGIN, END, render_markdown())


if __name__ == "__main__":  # python -m jmspy.transports.destination_options FILE
    import sys
    from pathlib import Path

    path = Path(sys.argv[1])
    path.write_text(rewrite(path.read_text()))
