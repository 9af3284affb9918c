"""The options of the ``jmspy`` Spark data source, checked once, before any connection.

Spark hands options over as strings in a case-insensitive dict; a mistake must fail the
query at start with a message that says what is wrong, not as a Py4J stack trace from the
middle of a micro-batch. Options: ``url`` (any transport URL; not ``vm://``, which is one
Python process's broker and Spark reads in another: serve it with
``BrokerHost.add_connector()``), ``destination``
(``queue://orders`` or ``topic://prices``; for the streaming reader also a comma-separated
list, ``queue://a,queue://b,topic://c``, and wildcard names where the broker has them,
``topic://prices.>``), ``selector``, ``subscriptionName`` (a durable topic subscription;
needs the ``clientID`` property), ``maxMessagesPerTrigger``, ``minMessagesPerTrigger`` with
``maxTriggerDelay`` (how long a trigger may wait for that many, Kafka's
``minOffsetsPerTrigger``: ``"15m"``, ``"30s"``, ``"500ms"`` or milliseconds; default 15
minutes), ``failOnDataLoss`` (fail the query when messages of its destinations expire or
are dead-lettered; default false: only counted, :mod:`.data_loss`), ``numPartitions``
(or ``minPartitions``, Kafka's name: read each micro-batch of queues on the executors in
that many tasks, under jmspy broker's reading leases, :mod:`.leased`) with
``leaseTimeout`` (how long the broker keeps a task's messages for the batch's commit;
default 10 minutes), ``jobId`` (the sink's stable write id, :mod:`.sink`), ``user`` /
``password``, and any ConnectionFactory property by its name (``imqConsumerFlowLimit``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jmspy.destinations import Destination, Queue, Topic
from jmspy.errors import InvalidConfigurationException
from jmspy.factory import ConnectionFactory
from jmspy.properties import PROPERTIES

__all__ = ["DEFAULT_LEASE_TIMEOUT_MS", "DEFAULT_MAX_TRIGGER_DELAY_MS",
           "DEFAULT_STREAM_FLOW_LIMIT", "READER_DEFAULTS", "SourceOptions", "parse_options"]

#: The consumer's flow limit when the options do not set ``imqConsumerFlowLimit``.
DEFAULT_STREAM_FLOW_LIMIT = 50_000
#: What the streaming reader's connection does unless the options say otherwise: it
#: reconnects when the broker goes away (a restart, a failover to the next address of
#: ``imqAddressList``) instead of failing the query. What it had not acknowledged the
#: broker delivers again, marked redelivered (at least once, as after a query restart).
READER_DEFAULTS: dict[str, Any] = {"imqReconnectEnabled": True}

_OWN = ("url", "destination", "selector", "subscriptionName", "maxMessagesPerTrigger",
        "minMessagesPerTrigger", "maxTriggerDelay", "failOnDataLoss", "numPartitions",
        "minPartitions", "leaseTimeout", "jobId", "user", "password", "path")
#: How long the broker keeps an executor task's messages for its batch's commit.
DEFAULT_LEASE_TIMEOUT_MS = 10 * 60 * 1000
#: Kafka's default maxTriggerDelay: a trigger short of minMessagesPerTrigger runs anyway
#: after this long since the last batch.
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
_DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_BY_LOWER = {name.lower(): name for name in (*_OWN, *PROPERTIES)}
#: Options Spark itself adds for a streaming sink or source (not ours to refuse).
_SPARKS = frozenset({"checkpointlocation", "queryname", "outputmode"})


@dataclass(frozen=True)
class SourceOptions:
    """Validated options; picklable (Spark ships the reader and writer to its workers)."""

    url: str
    kind: str  # "queue" or "topic"
    name: str
    selector: str | None = None
    subscription_name: str | None = None
    max_per_trigger: int | None = None
    user: str | None = None
    password: str | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    #: the sink's stable write id for ``df.write`` (.sink); None: one per write
    job_id: str | None = None
    #: the destinations after the first one of a list, as (kind, name)
    more: tuple[tuple[str, str], ...] = ()
    #: minMessagesPerTrigger (None: any number makes a batch) and maxTriggerDelay (ms)
    min_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    fail_on_data_loss: bool = False
    #: numPartitions: read on the executors in this many tasks (None: on the driver)
    num_partitions: int | None = None
    lease_timeout_ms: int = DEFAULT_LEASE_TIMEOUT_MS

    @property
    def destination(self) -> Destination:
        return Queue(self.name) if self.kind == "queue" else Topic(self.name)

    @property
    def destinations(self) -> list[Destination]:
        """Every destination the options name, the first one first."""
        return [self.destination, *(Queue(n) if k == "queue" else Topic(n)
                                    for k, n in self.more)]

    def factory(self, **defaults: Any) -> ConnectionFactory:
        """The factory of these options; ``defaults``: properties the options may
        override (the streaming reader's reconnect, :data:`READER_DEFAULTS`)."""
        return ConnectionFactory(self.url, **{**defaults, **self.properties})

    def describe(self) -> str:
        names = ",".join(f"{k}://{n}" for k, n in ((self.kind, self.name), *self.more))
        return f"{names} at {self.url}"

    def one_destination(self, what: str) -> None:
        """Refuse a list where ``what`` (a sink, a browse) takes one destination."""
        if self.more:
            raise _fail(f"{what} takes one destination, and the options name "
                        f"{len(self.more) + 1} ({self.describe()}); a list of destinations "
                        "is for readStream")


def _fail(what: str) -> InvalidConfigurationException:
    return InvalidConfigurationException(f"jmspy data source: {what}")


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Check ``options`` (see the module docstring); raise with what is wrong."""
    given: dict[str, str] = {}
    for key, value in options.items():
        name = _BY_LOWER.get(key.lower())
        if name is None and key.lower() in _SPARKS:
            continue
        if name is None:
            raise _fail(f"unknown option {key!r}; options are {', '.join(_OWN)} and the "
                        "ConnectionFactory properties (imqConsumerFlowLimit, ...)")
        given[name] = value
    url = given.get("url")
    if not url:
        raise _fail("option 'url' is missing: .option('url', 'stomp://127.0.0.1:61613')")
    if url.split(":", 1)[0].lower() == "vm":
        raise _fail(f"url {url!r}: vm:// is a broker inside one Python process, and Spark "
                    "reads in its own worker processes; serve that broker over STOMP "
                    "(url = host.add_connector() on its BrokerHost) or run `jmspy broker`, "
                    "and use the stomp:// URL")
    target = given.get("destination") or given.get("path")
    if not target:
        raise _fail("option 'destination' is missing: 'queue://NAME' or 'topic://NAME'")
    named = _destinations(target)
    (kind, name), more = named[0], tuple(named[1:])
    max_per_trigger = _count(given, "maxMessagesPerTrigger")
    min_per_trigger = _count(given, "minMessagesPerTrigger")
    if (min_per_trigger is not None and max_per_trigger is not None
            and min_per_trigger > max_per_trigger):
        raise _fail(f"minMessagesPerTrigger={min_per_trigger} is above "
                    f"maxMessagesPerTrigger={max_per_trigger}: no trigger could meet both")
    delay = DEFAULT_MAX_TRIGGER_DELAY_MS
    if "maxTriggerDelay" in given:
        if min_per_trigger is None:
            raise _fail("maxTriggerDelay bounds the wait for minMessagesPerTrigger: set "
                        "that too (or leave maxTriggerDelay out)")
        delay = _duration_ms("maxTriggerDelay", given["maxTriggerDelay"])
    fail_on_loss = (_typed("failOnDataLoss", given["failOnDataLoss"], bool)
                    if "failOnDataLoss" in given else False)
    partitions = _partitions(given, kind, more)
    lease_ms = DEFAULT_LEASE_TIMEOUT_MS
    if "leaseTimeout" in given:
        if partitions is None:
            raise _fail("leaseTimeout is how long the broker keeps the messages executors "
                        "read: set numPartitions too (or leave leaseTimeout out)")
        lease_ms = _duration_ms("leaseTimeout", given["leaseTimeout"])
        if not 1_000 <= lease_ms <= 86_400_000:
            raise _fail(f"leaseTimeout={given['leaseTimeout']!r} must be from 1s to 24h")
    subscription = given.get("subscriptionName")
    if subscription and (kind != "topic" or more):
        raise _fail("subscriptionName names a durable subscription: use one topic:// "
                    "destination")
    properties: dict[str, Any] = {}
    for prop, raw in given.items():
        spec = PROPERTIES.get(prop)
        if spec is None:
            continue
        properties[prop] = _typed(prop, raw, spec.type)
    if "imqConsumerFlowLimit" not in properties:
        # a micro-batch's messages stay unacknowledged until Spark commits it, so the
        # consumer must be allowed to hold several batches (the client default, 1000,
        # would cap each batch at 1000 and need a flush tick between batches)
        properties["imqConsumerFlowLimit"] = max(
            DEFAULT_STREAM_FLOW_LIMIT, 4 * (max_per_trigger or 0))
        # ...and refilled as soon as a commit frees room (at 50 % a 20,000-message trigger
        # got batches of 20,000 then 10,000, the broker's top-up not in time)
        properties.setdefault("imqConsumerFlowThreshold", 100)
    if subscription and not properties.get("clientID"):
        raise _fail("a durable subscription (subscriptionName) needs the clientID option")
    opts = SourceOptions(url, kind, name, given.get("selector") or None, subscription or None,
                         max_per_trigger, given.get("user"), given.get("password"), properties,
                         given.get("jobId") or None, more, min_per_trigger, delay,
                         fail_on_loss, partitions, lease_ms)
    try:
        opts.factory()  # the factory validates every property's range
    except InvalidConfigurationException as exc:
        raise _fail(str(exc)) from exc
    return opts


def _partitions(given: Mapping[str, str], kind: str,
                more: tuple[tuple[str, str], ...]) -> int | None:
    """numPartitions (or minPartitions): tasks per micro-batch on the executors."""
    counts = {o: _count(given, o) for o in ("numPartitions", "minPartitions") if o in given}
    if len(set(counts.values())) > 1:
        raise _fail(f"numPartitions and minPartitions are one option under two names, and "
                    f"they differ ({counts}); give one")
    if not counts:
        return None
    if kind != "queue" or any(k != "queue" for k, _ in more):
        raise _fail("numPartitions reads queues on the executors (each task takes its share "
                    "of the queue); a topic's messages go to each subscriber, so a topic is "
                    "read on the driver: leave numPartitions out")
    return next(iter(counts.values()))


def _destinations(target: str) -> list[tuple[str, str]]:
    """``queue://a,topic://b`` as [(kind, name)...]; each names its kind."""
    out: list[tuple[str, str]] = []
    for part in (p.strip() for p in target.split(",")):
        kind, sep, name = part.partition("://")
        if not sep or kind.lower() not in ("queue", "topic") or not name.strip():
            raise _fail(f"destination {part!r} (of {target!r}) must say its kind: "
                        "'queue://NAME' or 'topic://NAME', a list separated by commas")
        if (kind.lower(), name.strip()) in out:
            raise _fail(f"destination {part!r} is named twice in {target!r}")
        out.append((kind.lower(), name.strip()))
    return out


def _count(given: Mapping[str, str], option: str) -> int | None:
    if option not in given:
        return None
    try:
        value = int(given[option])
    except ValueError:
        value = 0
    if value < 1:
        raise _fail(f"{option}={given[option]!r} must be an integer >= 1")
    return value


def _duration_ms(option: str, raw: str) -> int:
    """``"15m"``, ``"30s"``, ``"500ms"``, ``"1h"`` or plain milliseconds, as ms."""
    text = str(raw).strip().lower()
    number, unit = text, "ms"
    for suffix in ("ms", "s", "m", "h"):  # "ms" before "s" and "m"
        if text.endswith(suffix):
            number, unit = text[: -len(suffix)].strip(), suffix
            break
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if value < 0:
        raise _fail(f"{option}={raw!r} must be a duration: '15m', '30s', '500ms', '1h' or "
                    "milliseconds")
    return int(value * _DURATION_UNITS[unit])


def _typed(name: str, raw: str, tp: type) -> Any:
    if tp is bool:
        if str(raw).lower() in ("true", "1", "yes"):
            return True
        if str(raw).lower() in ("false", "0", "no"):
            return False
        raise _fail(f"option {name}={raw!r} must be true or false")
    if tp is int:
        try:
            return int(raw)
        except ValueError:
            raise _fail(f"option {name}={raw!r} must be an integer") from None
    return raw
