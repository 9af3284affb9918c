"""One rule for property names: the Open MQ name is canonical and its snake_case twin is
accepted wherever it is -- ConnectionFactory keywords, ``factory[...]``, the worker pool's
activation properties -- through one table per kind built by jmspy/property_names.py;
both spellings of one property at once are refused, naming both."""

from __future__ import annotations

import os
import ssl
import threading
from collections.abc import Callable
from typing import Any

import pytest

from jmspy import ConnectionFactory, InvalidConfigurationException
from jmspy.pool import WorkerPool
from jmspy.pool.activation import NAMES as ACTIVATION_NAMES
from jmspy.properties import NAMES as FACTORY_NAMES
from jmspy.properties import PROPERTIES
from jmspy.property_names import PropertyNames, snake_case


@pytest.mark.parametrize(("camel", "snake"), [
    ("imqConsumerFlowLimit", "consumer_flow_limit"),
    ("imqConnectionFlowLimitEnabled", "connection_flow_limit_enabled"),
    ("imqAddressList", "address_list"),
    ("clientID", "client_id"),
    ("dupsOkBatchSize", "dups_ok_batch_size"),
    ("sendUndeliverableMsgsToDMQ", "send_undeliverable_msgs_to_dmq"),
    ("endpointExceptionRedeliveryInterval", "endpoint_exception_redelivery_interval"),
    ("imqueue", "imqueue"),  # "imq" followed by a lower-case letter is not the prefix
])
def test_snake_case_twin_drops_the_open_mq_prefix_and_splits_words(
        camel: str, snake: str) -> None:
    assert snake_case(camel) == snake


def test_every_factory_property_has_its_twin_in_the_one_table() -> None:
    for name, spec in PROPERTIES.items():
        assert spec.alias == snake_case(name)
        assert FACTORY_NAMES.canonical(spec.alias) == name
        assert FACTORY_NAMES.canonical(name) == name


@pytest.mark.parametrize("name", sorted(PROPERTIES))
def test_the_factory_takes_each_property_under_its_twin_in_the_constructor_and_by_item(
        name: str) -> None:
    twin = snake_case(name)
    value = PROPERTIES[name].default
    sample: Any = {bool: True, int: 7, str: "x", object: None}[PROPERTIES[name].type]
    if name in ("sslCAFile", "sslCertFile", "sslKeyFile"):
        sample = __file__  # checked: an existing, readable file
    elif name == "sslCAPath":
        sample = os.path.dirname(__file__)
    elif name == "sslVerify":
        sample = False  # True is the default
    elif name == "sslContext":
        sample = ssl.create_default_context()
    elif name == "imqAddressList":
        sample = "stomp://h1:61613,stomp://h2:61613"
    elif name == "imqAddressListBehavior":
        sample = "RANDOM"
    elif name == "imqConsumerFlowThreshold":
        sample = 80
    assert sample != value
    factory = ConnectionFactory("vm://names", **{twin: sample})
    assert factory[name] == sample and factory[twin] == sample
    factory = ConnectionFactory("vm://names")
    factory[twin] = sample
    assert factory.properties.snapshot()[name] == sample
    del factory.properties[twin]
    assert factory[name] == value


def test_consumer_flow_limit_by_its_twin_sets_the_consumers_window(
        vm_factory: ConnectionFactory) -> None:
    factory = ConnectionFactory(vm_factory.url, consumer_flow_limit=10)
    with factory.create_connection() as conn:
        session = conn.create_session()
        consumer = session.create_consumer(session.create_queue("window"))
        assert consumer.flow_stats().limit == 10


def test_both_spellings_of_one_factory_property_are_refused_naming_both() -> None:
    with pytest.raises(InvalidConfigurationException) as caught:
        ConnectionFactory("vm://names", imqConsumerFlowLimit=10, consumer_flow_limit=20)
    text = str(caught.value)
    assert "'imqConsumerFlowLimit'" in text and "'consumer_flow_limit'" in text
    assert "given twice" in text and "give it once" in text


@pytest.mark.parametrize(("given", "suggested"), [
    ("imqConsumerFlowLimt", "Did you mean 'imqConsumerFlowLimit'?"),
    ("consumer_flow_limt", "Did you mean 'consumer_flow_limit' (imqConsumerFlowLimit)?"),
])
def test_unknown_factory_names_in_either_spelling_get_the_nearest_known_one(
        given: str, suggested: str) -> None:
    with pytest.raises(InvalidConfigurationException, match="unknown connection factory") as c:
        ConnectionFactory("vm://names", **{given: 1})
    assert suggested in str(c.value)
    with pytest.raises(InvalidConfigurationException, match="unknown connection factory"):
        ConnectionFactory("vm://names")[given] = 1


def test_activation_properties_follow_the_same_rule_and_refuse_both_spellings(
        vm_factory: ConnectionFactory) -> None:
    for name in ACTIVATION_NAMES.canonical_names:
        assert ACTIVATION_NAMES.canonical(snake_case(name)) == name
    pool = WorkerPool(vm_factory, "names", print, sendUndeliverableMsgsToDMQ=False,
                      endpoint_exception_redelivery_interval=10)
    assert pool.spec.send_undeliverable_msgs_to_dmq is False
    assert pool.spec.endpoint_exception_redelivery_interval == 10
    with pytest.raises(InvalidConfigurationException) as caught:
        WorkerPool(vm_factory, "names", print, steadyPoolSize=1, steady_pool_size=2)
    assert "'steadyPoolSize'" in str(caught.value) and "'steady_pool_size'" in str(caught.value)
    with pytest.raises(InvalidConfigurationException, match="given twice"):
        WorkerPool(vm_factory, "names", print, max_pool_size=4, maxPoolSize=8)
    with pytest.raises(InvalidConfigurationException, match="Did you mean 'maxPoolSize'"):
        WorkerPool(vm_factory, "names", print, maxPoolSise=4)


def test_a_pool_on_a_factory_made_with_twins_gets_the_twins_values(
        vm_broker_factory: Callable[..., Any]) -> None:
    """Both tables at once: a factory made with snake_case twins, a pool whose activation
    properties are snake_case, and the pool's concurrency follows the factory's limit."""
    _, plain = vm_broker_factory()
    factory = ConnectionFactory(plain.url, consumer_flow_limit=3)
    release = threading.Event()
    with WorkerPool(factory, "twins", lambda m: release.wait(30), max_pool_size=8,
                    steady_pool_size=8) as pool:
        assert pool.concurrency == 3  # min(pool 8, the factory's limit 3)
        release.set()


def test_a_table_whose_twin_would_stand_for_two_names_is_refused() -> None:
    with pytest.raises(ValueError, match="would stand for both"):
        PropertyNames(["imqFlowLimit", "flowLimit"], what="test property")


