"""A worker pool's activation properties: the Open MQ resource adapter's and Glassfish's
MDB names and defaults (seed 004), each with its snake_case twin.

An application server configures a message-driven bean with *activation properties*
(which destination, which selector, durable or not, how to acknowledge) and its bean
pool (how many instances). :class:`ActivationSpec` is those, validated once, with the
defaults an MDB gets on Glassfish with Open MQ: ``maxPoolSize`` 32; Glassfish's MDB
container keeps ``steadyPoolSize`` 10 instances (at most ``maxPoolSize``), adds
``poolResizeQuantity`` 2 at a time when all are busy and removes idle ones above the
steady size after 600 s; the RA redelivers a message whose listener raised
``endpointExceptionRedeliveryAttempts`` (6) times, ``endpointExceptionRedeliveryInterval``
(500 ms) apart, then sends it to the dead message queue
(``sendUndeliverableMsgsToDMQ``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jmspy.errors import InvalidConfigurationException
from jmspy.property_names import PropertyNames

__all__ = ["CAMEL_NAMES", "NAMES", "ActivationSpec"]

_DESTINATION_TYPES = {
    "queue": "queue", "jakarta.jms.queue": "queue", "javax.jms.queue": "queue",
    "topic": "topic", "jakarta.jms.topic": "topic", "javax.jms.topic": "topic",
}
_DURABILITY = {"nondurable": False, "durable": True}
_ACK_MODES = ("Auto-acknowledge", "Dups-ok-acknowledge")


@dataclass(frozen=True, slots=True)
class ActivationSpec:
    """Validated activation properties (see the module docstring for the defaults)."""

    destination: str
    #: "queue" or "topic" (the RA's ``jakarta.jms.Queue`` / ``jakarta.jms.Topic`` too)
    destination_type: str = "queue"
    message_selector: str | None = None
    #: "NonDurable" or "Durable" (a durable topic subscription, named below)
    subscription_durability: str = "NonDurable"
    subscription_name: str | None = None
    client_id: str | None = None
    #: "Auto-acknowledge" or "Dups-ok-acknowledge": either way each message is
    #: acknowledged when its listener instance returns (the RA's behaviour)
    acknowledge_mode: str = "Auto-acknowledge"
    max_pool_size: int = 32
    #: kept even when idle (at most ``max_pool_size``: a smaller pool keeps them all)
    steady_pool_size: int = 10
    pool_resize_quantity: int = 2
    #: seconds an instance beyond ``steady_pool_size`` may stay idle before it goes
    idle_timeout: float = 600.0
    endpoint_exception_redelivery_attempts: int = 6
    #: ms between a listener's exception and the message's next delivery
    endpoint_exception_redelivery_interval: int = 500
    send_undeliverable_msgs_to_dmq: bool = True
    #: where undeliverable messages go (jmspy broker's dead-letter queue; ActiveMQ's is
    #: "ActiveMQ.DLQ")
    dead_letter_queue: str = "DLQ"

    def __post_init__(self) -> None:
        def bad(what: str) -> InvalidConfigurationException:
            return InvalidConfigurationException(f"worker pool: {what}")

        if not isinstance(self.destination, str) or not self.destination:
            raise bad(f"destination must be a Queue, a Topic or a non-empty destination "
                      f"name, got {self.destination!r}")
        kind = _DESTINATION_TYPES.get(str(self.destination_type).lower())
        if kind is None:
            raise bad(f"destinationType {self.destination_type!r} must be 'queue' or 'topic' "
                      "(or jakarta.jms.Queue / jakarta.jms.Topic)")
        object.__setattr__(self, "destination_type", kind)
        durable = _DURABILITY.get(str(self.subscription_durability).lower())
        if durable is None:
            raise bad(f"subscriptionDurability {self.subscription_durability!r} must be "
                      "'NonDurable' or 'Durable'")
        if durable and (kind != "topic" or not self.subscription_name):
            raise bad("subscriptionDurability 'Durable' needs destinationType 'topic' and a "
                      "subscriptionName")
        if self.acknowledge_mode not in _ACK_MODES:
            raise bad(f"acknowledgeMode {self.acknowledge_mode!r} must be one of "
                      f"{', '.join(_ACK_MODES)}")
        for name, low in (("max_pool_size", 1), ("steady_pool_size", 0),
                          ("pool_resize_quantity", 1),
                          ("endpoint_exception_redelivery_attempts", 0),
                          ("endpoint_exception_redelivery_interval", 0)):
            value = getattr(self, name)
            if type(value) is not int or value < low:
                raise bad(f"{_camel(name)} must be an int >= {low}, got {value!r}")
        if self.steady_pool_size > self.max_pool_size:
            object.__setattr__(self, "steady_pool_size", self.max_pool_size)
        if not isinstance(self.idle_timeout, int | float) or self.idle_timeout <= 0:
            raise bad(f"idle timeout must be > 0 seconds, got {self.idle_timeout!r}")

    @property
    def durable(self) -> bool:
        return self.subscription_durability.lower() == "durable"

    @classmethod
    def from_properties(cls, destination: str, properties: Mapping[str, Any]
                        ) -> ActivationSpec:
        """From keyword properties in either spelling (``maxPoolSize`` or
        ``max_pool_size``, by the rule of jmspy/property_names.py); an unknown name is
        refused with the valid ones, both spellings of one name naming both."""
        kwargs: dict[str, Any] = {}
        for name, value in NAMES.resolve(properties).items():
            if NAMES.canonical(name) is None or name == "destination":
                raise InvalidConfigurationException(
                    f"worker pool: unknown activation property {name!r}."
                    f"{NAMES.suggestion(name)} Valid: {', '.join(sorted(CAMEL_NAMES))} (or "
                    "their snake_case twins)")
            kwargs[NAMES.twin(name)] = value
        return cls(destination, **kwargs)


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w.title() for w in rest)


#: The activation properties' canonical (camelCase) names, each with its snake_case twin,
#: which is the ActivationSpec field it sets.
NAMES = PropertyNames(
    ["sendUndeliverableMsgsToDMQ", "clientID",
     *(_camel(f.name) for f in dataclasses.fields(ActivationSpec)
       if f.name not in ("send_undeliverable_msgs_to_dmq", "client_id"))],
    what="worker pool activation property",
    extra_twins={"clientId": "clientID"},
)

#: camelCase activation property -> field name
CAMEL_NAMES: Mapping[str, str] = {
    **{name: NAMES.twin(name) for name in NAMES.canonical_names if name != "destination"},
    "clientId": "client_id",
}
