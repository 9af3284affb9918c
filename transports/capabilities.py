"""The capability matrix: what each transport and broker does with each JMS feature.

Everything that decides whether a feature is carried natively, emulated on the client or
refused lives here (the STOMP columns are read off the broker profiles in
:mod:`.stomp.mapping`, which also choose the headers). The transports ask
:func:`require` at every place they would refuse a feature, so changing a cell changes
the behaviour, the error message and docs/capabilities.md together; tests check that
the document is the rendering of this table and that every cell behaves as it says.

Columns are what a transport can tell apart at run time: the in-process broker; the
STOMP broker named by CONNECTED's ``server`` header; for MQTT the protocol version
negotiated, because MQTT has no way to name the server (the column titles say which
brokers were tested with it).

Regenerate the document after editing a cell::

    python -P -m jmspy.transports.capabilities docs/capabilities.md   # in the checkout root
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from jmspy.capabilities import (
    Cell,
    Feature,
    RefusedFeatureException,
    Support,
    emulated,
    native,
    refused,
)

from . import destination_options
from .stomp.mapping import STOMP_TARGETS, stomp_cells

__all__ = [
    "TARGETS",
    "Column",
    "cell",
    "column",
    "main",
    "native_features",
    "refusal",
    "render_markdown",
    "require",
    "supports",
]

_F = Feature


@dataclass(frozen=True, slots=True)
class Column:
    """One target: a transport (URL scheme) and a broker or protocol version."""

    transport: str
    key: str
    name: str  # the broker or protocol, as errors name it
    cells: Mapping[Feature, Cell]
    note: str = ""  # the docs add it to the column title (the brokers tested)

    @property
    def title(self) -> str:
        return f"{self.transport}:// {self.name}" + (f" ({self.note})" if self.note else "")


_VM: Final = {
    _F.CONSUMER_WINDOW: native("credit granted to the broker core"),
    _F.CONNECTION_FLOW_LIMIT: native("the core gates deliveries on the connection"),
    _F.QUEUES: native(),
    _F.TOPIC_SELECTORS: native("evaluated in the broker"),
    _F.QUEUE_SELECTORS: native("evaluated in the broker; skipped messages stay queued"),
    _F.TRANSACTIONS: native(),
    _F.REDELIVERY: native("cancel puts messages back at the head, in order"),
    _F.DELIVERY_COUNT: native("counted by the broker"),
    _F.BROWSER: native(),
    _F.DELIVERY_DELAY: native("the broker's timer"),
    _F.PRIORITY: native("higher priority delivered first"),
    _F.TIME_TO_LIVE: native(),
    _F.HEADERS: native("messages keep their types"),
    _F.DURABLE_SUBSCRIPTIONS: native("needs a client id"),
    _F.UNSUBSCRIBE: native(),
    _F.SHARED_SUBSCRIPTIONS: native(),
    _F.NO_LOCAL: native(),
    _F.OVERLAPPING_SUBSCRIPTIONS: native(),
    _F.WILDCARD_SUBSCRIPTIONS: native("routed by the broker; JMSDestination is the concrete topic"),
    _F.TEMPORARY_QUEUES: native(),
    _F.DESTINATION_STATS: native("needs the `admin` permission"),
    _F.DESTINATION_OPTIONS: destination_options.cell("vm", "embedded"),
    _F.READING_LEASES: native("the broker core's leases"),
}

#: what to do where a broker has no reading leases (jmspy.spark reads on the driver then)
_LEASES_INSTEAD = ("acknowledge on the connection that received the message, or use "
                   "jmspy broker (vm:// or stomp://)")

_NO_TX = refused(
    "MQTT has no transactions", "use AUTO_ACKNOWLEDGE or CLIENT_ACKNOWLEDGE sessions")
_PAYLOAD_ONLY = "MQTT 3.1.1 carries only the payload"
_USE_V5 = "use a broker that speaks MQTT 5 (e.g. Mosquitto 2)"


def _mqtt(v5: bool) -> dict[Feature, Cell]:
    return {
        _F.CONSUMER_WINDOW: emulated(
            "the client stash; Receive Maximum bounds the broker" if v5
            else "the client stash; nothing bounds what the broker pushes"),
        _F.CONNECTION_FLOW_LIMIT: native("Receive Maximum (CONNECT property)") if v5
        else emulated("the client stash only"),
        _F.QUEUES: native("shared subscription `$share/jmspy/<topic>`; nothing is kept "
                          "while no consumer (or persistent session) is subscribed") if v5
        else refused("MQTT 3.1.1 has no shared subscriptions", f"use a Topic, or {_USE_V5}"),
        _F.TOPIC_SELECTORS: emulated(
            "in the client; non-matching messages are acknowledged and dropped"
            + ("" if v5 else "; only JMS headers can match (no properties)")),
        _F.QUEUE_SELECTORS: refused(
            "a client-side filter would consume (delete) the queue messages it skips",
            "use a Topic, or add `?queue_selectors=discard` to the URL to accept that "
            "non-matching messages are acknowledged and dropped") if v5
        else refused("MQTT 3.1.1 has no queues", _USE_V5, blocked_by=_F.QUEUES),
        _F.TRANSACTIONS: _NO_TX,
        _F.REDELIVERY: emulated("from the client's copy (MQTT has no NACK); the broker "
                                "redelivers to a persistent session after a reconnect"),
        _F.DELIVERY_COUNT: emulated("the client's own count; DUP flag = 2"),
        _F.BROWSER: refused("MQTT cannot look at messages without consuming them",
                            "consume the messages, or use stomp:// to ActiveMQ 5"),
        _F.DELIVERY_DELAY: refused("MQTT brokers have no scheduled delivery",
                                   "delay in the application"),
        _F.PRIORITY: refused("MQTT delivers in order, it has no priorities",
                             "send with the default priority 4"),
        _F.TIME_TO_LIVE: native("Message Expiry Interval") if v5
        else refused(_PAYLOAD_ONLY, f"send without a time to live, or {_USE_V5}"),
        _F.HEADERS: native("user properties, Correlation Data, Response Topic, Content "
                           "Type") if v5
        else refused(_PAYLOAD_ONLY, "send a Text or Bytes message without properties, "
                     f"correlation id, reply-to or type, or {_USE_V5}"),
        _F.DURABLE_SUBSCRIPTIONS: native("a persistent session; needs a client id"),
        _F.UNSUBSCRIBE: native("from the connection that created the name"),
        _F.SHARED_SUBSCRIPTIONS: native("`$share/<name>/<topic>`") if v5
        else refused("MQTT 3.1.1 has no shared subscriptions", _USE_V5),
        _F.NO_LOCAL: native("the NoLocal subscription option") if v5
        else refused("NoLocal is an MQTT 5 subscription option", _USE_V5),
        _F.OVERLAPPING_SUBSCRIPTIONS: native("Subscription Identifier routes each copy") if v5
        else refused("MQTT 3.1.1 cannot say which subscription a message is for (ActiveMQ "
                     "sends a copy per subscription, RabbitMQ one)",
                     f"use a separate connection, or {_USE_V5}"),
        _F.WILDCARD_SUBSCRIPTIONS: native("`+` and `#` (a multi-word wildcard only as the "
                                          "last word)"),
        _F.TEMPORARY_QUEUES: refused("MQTT has no temporary destinations",
                                     "use a uniquely named topic"),
        _F.DESTINATION_STATS: refused("MQTT has no per-topic counters",
                                      "use the broker's management tools"),
        _F.DESTINATION_OPTIONS: destination_options.cell("mqtt", "5" if v5 else "3.1.1"),
        _F.READING_LEASES: refused("MQTT acknowledges a message only on the connection it "
                                   "came on", _LEASES_INSTEAD),
    }


#: Every column of the matrix, in the order the docs show them.
TARGETS: Final[tuple[Column, ...]] = (
    Column("vm", "embedded", "in-process broker", _VM),
    *(Column("stomp", key, name, stomp_cells(key)) for key, name in STOMP_TARGETS.items()),
    Column("mqtt", "5", "MQTT 5", _mqtt(True), "Mosquitto 2, jmspy broker"),
    Column("mqtt", "3.1.1", "MQTT 3.1.1", _mqtt(False), "ActiveMQ 5, RabbitMQ"),
)
_BY_KEY: Final = {(c.transport, c.key): c for c in TARGETS}


def column(transport: str, key: str) -> Column:
    try:
        return _BY_KEY[(transport, key)]
    except KeyError:
        raise KeyError(f"no capability column {transport}:{key}") from None


def cell(transport: str, key: str, feature: Feature) -> Cell:
    return column(transport, key).cells[feature]


def supports(transport: str, key: str, feature: Feature) -> bool:
    """Whether the feature works (natively or emulated) on this target."""
    return cell(transport, key, feature).support is not Support.REFUSED


def require(
    transport: str, key: str, feature: Feature, *, where: str, detail: str = ""
) -> None:
    """Return when the matrix says ``feature`` works on this target (natively or
    emulated); otherwise raise its :class:`RefusedFeatureException`, which names the
    transport, the broker (``where``: server and host:port), why, and what to do instead.
    ``detail`` replaces the feature's name in the message when the caller knows exactly
    what was asked for."""
    if cell(transport, key, feature).support is Support.REFUSED:
        raise refusal(transport, key, feature, where=where, detail=detail)


def refusal(
    transport: str, key: str, feature: Feature, *, where: str, detail: str = ""
) -> RefusedFeatureException:
    """The error for ``feature`` on this target. A transport raises it directly where it
    has no implementation at all (MQTT transactions); should the matrix ever claim such a
    feature works, the error says the two disagree instead of the call silently doing
    nothing (and the capability tests fail)."""
    col = column(transport, key)
    c = col.cells[feature]
    subject = detail or feature.value
    if c.support is not Support.REFUSED:
        why = (f"the capability matrix marks it {c.support.value}, but the transport has no "
               "implementation; report this jmspy bug")
    else:
        why = f"{c.how}; {c.instead}"
    return RefusedFeatureException(
        f"{subject} is not supported by the {transport}:// transport on {col.name} "
        f"({where}): {why}",
        feature=c.blocked_by or feature,
        transport=transport,
        target=col.key,
    )


def native_features(transport: str, key: str) -> frozenset[Feature]:
    """``Transport.capabilities`` for a target: the features it carries natively
    (emulated ones are left out: the broker does not do them)."""
    cells = column(transport, key).cells
    return frozenset(f for f, c in cells.items() if c.support is Support.NATIVE)


# -- docs/capabilities.md ------------------------------------------------------------------
BEGIN: Final = "<!-- capability matrix: generated, do not edit (see above) -->"
END: Final = "<!-- end of capability matrix -->"


def render_markdown() -> str:
    """The whole matrix as one Markdown table (features down, targets across)."""
    lines = [
        "| feature | " + " | ".join(c.title for c in TARGETS) + " |",
        "| --- |" + " --- |" * len(TARGETS),
    ]
    for feature in Feature:
        lines.append(
            f"| {feature.value} | " + " | ".join(c.cells[feature].text() for c in TARGETS) + " |"
        )
    return "\n".join(lines) + "\n"


def rewrite(doc: str) -> str:
    """``doc`` with the text between the BEGIN and END markers replaced by the matrix."""
    return destination_options.replace_block(doc, BEGIN, END, render_markdown())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -P -m jmspy.transports.capabilities docs/capabilities.md",
              file=sys.stderr)
        return 2
    path = Path(args[0])
    path.write_text(rewrite(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
