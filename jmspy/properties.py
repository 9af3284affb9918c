"""Connection factory properties, under the names Open MQ users already know.

One table (:data:`PROPERTIES`) is the single source of truth: validation, defaults,
``ConnectionFactory`` item access and the README's property reference all come from it,
so the documentation cannot drift from the code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidConfigurationException
from .property_names import PropertyNames, snake_case

__all__ = ["PROPERTIES", "FactoryProperties", "PropertySpec"]


@dataclass(frozen=True, slots=True)
class PropertySpec:
    """One factory property: its type, default, allowed range and meaning."""

    name: str
    type: type
    default: Any
    meaning: str
    side: str = "client"
    minimum: int | None = None
    maximum: int | None = None
    check: Callable[[Any], str | None] | None = None
    #: the snake_case twin accepted in its place (``address_list`` for imqAddressList),
    #: derived by jmspy.property_names.snake_case
    alias: str | None = None

    def __post_init__(self) -> None:
        if self.alias is None:
            object.__setattr__(self, "alias", snake_case(self.name))

    def validate(self, value: Any) -> Any:
        """Return the value converted to the property's type, or raise with a fix."""
        want = self.type
        if want is bool:
            if isinstance(value, str) and value.lower() in ("true", "false"):
                value = value.lower() == "true"
            if not isinstance(value, bool):
                raise InvalidConfigurationException(
                    f"{self.name} must be True or False, got {value!r}"
                )
            return value
        if want is int:
            if isinstance(value, str):
                try:
                    value = int(value.strip())
                except ValueError:
                    pass
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidConfigurationException(
                    f"{self.name} must be an integer, got {value!r}"
                )
            if self.minimum is not None and value < self.minimum:
                raise InvalidConfigurationException(
                    f"{self.name}={value} is out of range: {self._range()}"
                )
            if self.maximum is not None and value > self.maximum:
                raise InvalidConfigurationException(
                    f"{self.name}={value} is out of range: {self._range()}"
                )
            return value
        if value is not None and not isinstance(value, want):
            raise InvalidConfigurationException(
                f"{self.name} must be a {want.__name__}, got {value!r}"
            )
        if self.check is not None and value is not None:
            problem = self.check(value)
            if problem:
                raise InvalidConfigurationException(f"{self.name}={value!r}: {problem}")
        return value

    def _range(self) -> str:
        if self.maximum is None:
            return f"use a value >= {self.minimum}"
        return f"use a value from {self.minimum} to {self.maximum}"


def _behavior_problem(value: str) -> str | None:
    from .address_list import BEHAVIORS

    if value.upper() not in BEHAVIORS:
        return f"use one of {', '.join(BEHAVIORS)} (default PRIORITY)"
    return None


def _address_list_problem(value: str) -> str | None:
    from .address_list import address_list_problem

    return address_list_problem(value)


def _file_problem(value: str) -> str | None:
    from .tls import path_problem

    return path_problem(value)


def _directory_problem(value: str) -> str | None:
    from .tls import path_problem

    return path_problem(value, directory=True)


def _context_problem(value: object) -> str | None:
    from .tls import context_problem

    return context_problem(value)


def _client_id_problem(value: str) -> str | None:
    if not value or any(c.isspace() for c in value):
        return "a client id must be non-empty and contain no whitespace"
    return None


PROPERTIES: Mapping[str, PropertySpec] = {
    spec.name: spec
    for spec in (
        PropertySpec(
            "imqConsumerFlowLimit", int, 1000,
            "Most messages delivered to one consumer and not yet consumed (acknowledged or "
            "committed). 0 = pull: one message per receive(). The destination's "
            "consumerFlowLimit wins when lower.",
            minimum=0, maximum=2**31 - 1,
        ),
        PropertySpec(
            "imqConsumerFlowThreshold", int, 50,
            "Percent of the limit at which the consumer asks for more: when unconsumed "
            "messages fall to limit x threshold%, it asks for limit - unconsumed.",
            minimum=0, maximum=100,
        ),
        PropertySpec(
            "imqConnectionFlowLimitEnabled", bool, False,
            "Turn on the connection-wide cap imqConnectionFlowLimit.",
        ),
        PropertySpec(
            "imqConnectionFlowLimit", int, 1000,
            "Most messages buffered unconsumed across all consumers of one connection "
            "(only when imqConnectionFlowLimitEnabled), on top of each consumer's limit.",
            minimum=1, maximum=2**31 - 1,
        ),
        PropertySpec(
            "imqDefaultUsername", str, None,
            "User name used when create_connection() is given none.",
        ),
        PropertySpec(
            "imqDefaultPassword", str, None,
            "Password used when create_connection() is given none.",
        ),
        PropertySpec(
            "clientID", str, None,
            "Client id set on every connection (needed for unshared durable subscriptions).",
            check=_client_id_problem,
        ),
        PropertySpec(
            "dupsOkBatchSize", int, 100,
            "DUPS_OK_ACKNOWLEDGE sends one acknowledgement per this many messages (and "
            "whenever the consumer's buffer runs empty).",
            minimum=1, maximum=100_000,
        ),
        PropertySpec(
            "imqReconnectEnabled", bool, False,
            "Reconnect (stomp://, mqtt://, vm://) when the connection to the broker drops: "
            "subscriptions are re-created, prefetched and unacknowledged messages are "
            "dropped (the broker redelivers them, marked redelivered) and the exception "
            "listener hears CONNECTION_INTERRUPTED, then CONNECTION_RESUMED naming the "
            "broker it is on now. Off: CONNECTION_LOST and later calls fail.",
        ),
        PropertySpec(
            "imqReconnectAttempts", int, 6,
            "Reconnect attempts at each address of the list, per pass, before moving on "
            "(and, after the last pass, giving up: CONNECTION_LOST); -1 = forever (with an "
            "address list: one attempt per address, passes without end).",
            minimum=-1, maximum=1_000_000,
        ),
        PropertySpec(
            "imqReconnectInterval", int, 3000,
            "Milliseconds before the first reconnect attempt; the wait doubles after each "
            "failed attempt up to 30 s (with +-20% jitter), except that the first attempt "
            "at the next address of a list goes at once. Sends block for the whole "
            "reconnect window, then fail naming host:port.",
            minimum=1, maximum=3_600_000,
        ),
        PropertySpec(
            "imqAddressList", str, None,
            "Broker URLs separated by commas, all of one transport (stomp:// with "
            "stomp+ssl://, or mqtt:// with mqtts://; TLS is per address), e.g. "
            "'stomp://h1:61613,stomp://h2:61613'; the connection URL may be such a "
            "list too. None = the connection URL alone. conn.where names the one in use.",
            check=_address_list_problem,
        ),
        PropertySpec(
            "imqAddressListBehavior", str, "PRIORITY",
            "PRIORITY: connect and reconnect trying the addresses in list order (the first "
            "is preferred); RANDOM: in a new random order on each pass (spreads clients "
            "over a cluster).",
            check=_behavior_problem,
        ),
        PropertySpec(
            "imqAddressListIterations", int, 1,
            "Passes over the address list when connecting or reconnecting, each making "
            "imqReconnectAttempts attempts per address (the first connection: one attempt "
            "per address per pass); -1 = forever when reconnecting, one pass when "
            "connecting.",
            minimum=-1, maximum=1_000_000,
        ),
        PropertySpec(
            "sslCAFile", str, None,
            "TLS (stomp+ssl://, mqtts://): PEM file of the CAs that may sign the broker's "
            "certificate, instead of the system's CAs (URL: ?ca_file=).",
            check=_file_problem,
        ),
        PropertySpec(
            "sslCAPath", str, None,
            "TLS: a directory of hashed CA certificates (`openssl rehash`), beside or "
            "instead of sslCAFile (mqtts:// only; URL: ?ca_path=).",
            check=_directory_problem,
        ),
        PropertySpec(
            "sslCertFile", str, None,
            "TLS: PEM file of this client's certificate, for brokers that require one "
            "(it may hold the key too; URL: ?cert_file=).",
            check=_file_problem,
        ),
        PropertySpec(
            "sslKeyFile", str, None,
            "TLS: PEM file of the client certificate's private key, when not in "
            "sslCertFile (URL: ?key_file=).",
            check=_file_problem,
        ),
        PropertySpec(
            "sslKeyPassword", str, None,
            "TLS: password of an encrypted client key (URL: ?key_password=).",
        ),
        PropertySpec(
            "sslVerify", bool, True,
            "TLS: check the broker's certificate and host name. False turns both off and "
            "logs a WARNING at every connect: anyone on the path can pose as the broker "
            "(URL: ?verify=false).",
        ),
        PropertySpec(
            "sslContext", object, None,
            "TLS: a ready ssl.SSLContext (ssl_context=ctx) used as it is instead of the "
            "ssl* properties (mqtts:// only: stomp.py builds its own context).",
            check=_context_problem,
        ),
        PropertySpec(
            "persistentSendWindow", int, 1,
            "stomp://: most persistent sends (outside a transaction) awaiting the broker's "
            "RECEIPT at once, the current one included. 1 = send() returns once the broker "
            "has the message, and its refusal is raised by that send() "
            "(JMSSecurityException, ResourceAllocationException). N > 1 = up to N-1 earlier "
            "sends may be unconfirmed when send() returns; a refusal is raised by the next "
            "send(), commit() or close(). Non-persistent sends carry a receipt once every 400 "
            "sends (or 1 MiB) and the next such checkpoint waits for it, so a broker that "
            "applies producer flow control holds the producer there.",
            minimum=1, maximum=100_000,
        ),
        PropertySpec(
            "sendTimeout", int, 30_000,
            "Milliseconds a persistent send() or a commit() may wait for the broker to "
            "confirm it: while the broker applies producer flow control (its memory, store "
            "or temp space is full), or when it went silent. 0 = as long as it takes. Past "
            "it the call raises ResourceAllocationException naming sendTimeout (jmspy broker "
            "and vm://: the message was not stored; stomp:// waits 5 s more for the "
            "broker's own answer; mqtt://: the wait for a QoS 1 PUBACK, 30 s when 0).",
            minimum=0, maximum=86_400_000,
        ),
        PropertySpec(
            "closeTimeout", int, 5,
            "Seconds close() waits for running listeners to finish, and (stomp://) for the "
            "broker to confirm the DISCONNECT and unconfirmed persistent sends; past it the "
            "connection is closed anyway and close() raises a JMSException naming "
            "closeTimeout (CLOSE_TIMEOUT). 0 = as long as it takes (listeners), 30 s "
            "(broker answers).",
            minimum=0, maximum=86_400,
        ),
    )
}


#: Every property's two spellings (the Open MQ name and its snake_case twin), by the one
#: rule of jmspy/property_names.py.
NAMES = PropertyNames(PROPERTIES, what="connection factory property")


class FactoryProperties(MutableMapping[str, Any]):
    """The validated property set of one ConnectionFactory (unknown names are refused)."""

    def __init__(self, initial: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = {name: spec.default for name, spec in PROPERTIES.items()}
        for name, value in NAMES.resolve(initial or {}).items():  # both spellings: refused
            self[name] = value

    @staticmethod
    def spec(name: str) -> PropertySpec:
        canonical = NAMES.canonical(name)
        if canonical is None:
            raise InvalidConfigurationException(
                f"unknown connection factory property {name!r}.{NAMES.suggestion(name)} "
                f"Known properties: {', '.join(PROPERTIES)} (or their snake_case twins, "
                "consumer_flow_limit for imqConsumerFlowLimit)"
            )
        return PROPERTIES[canonical]

    def __getitem__(self, name: str) -> Any:
        return self._values[self.spec(name).name]

    def __setitem__(self, name: str, value: Any) -> None:
        spec = self.spec(name)
        self._values[spec.name] = spec.validate(value)

    def __delitem__(self, name: str) -> None:
        spec = self.spec(name)
        self._values[spec.name] = spec.default

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def snapshot(self) -> dict[str, Any]:
        """A copy taken when a connection is created: later factory changes don't leak in."""
        return dict(self._values)


def reference_table() -> str:
    """The Markdown property reference (the README embeds this output)."""
    rows = ["| property | default | meaning | side |", "| --- | --- | --- | --- |"]
    for spec in PROPERTIES.values():
        name = f"`{spec.name}`" + (f" (`{spec.alias}`)" if spec.alias else "")
        rows.append(f"| {name} | `{spec.default!r}` | {spec.meaning} | {spec.side} |")
    return "\n".join(rows)
