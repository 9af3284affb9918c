"""Every error jmspy raises is a JMSException: ``except JMSException`` catches all of them,
the bundled broker's own (reached through ``vm://`` and its host API) included.

The walk imports every module of the installed package (the client, jmspy.transports,
jmspy.broker_ref) and looks at each public exception class defined there; a module that
needs an optional dependency which is not installed (pyspark) is skipped by name."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import jmspy
import jmspy.broker_ref
import jmspy.transports
from jmspy import ConnectionFactory, InvalidDestinationException, JMSException
from jmspy.broker_ref.core import errors as core
from jmspy.transports import vm

#: Modules that import a library jmspy does not require (the ``spark`` extra).
OPTIONAL = {"pyspark"}


def _modules() -> list[ModuleType]:
    found: list[ModuleType] = []
    for package in (jmspy, jmspy.transports, jmspy.broker_ref):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if info.name.endswith("__main__"):  # running it is the CLI
                continue
            try:
                found.append(importlib.import_module(info.name))
            except ModuleNotFoundError as exc:
                assert exc.name in OPTIONAL, f"{info.name}: {exc}"
    return found


MODULES = _modules()
EXCEPTIONS = sorted(
    {
        cls for module in MODULES for name, cls in vars(module).items()
        if inspect.isclass(cls) and issubclass(cls, BaseException)
        and cls.__module__ == module.__name__ and not name.startswith("_")
    },
    key=lambda c: f"{c.__module__}.{c.__qualname__}",
)


def test_the_walk_sees_the_client_the_transports_and_the_broker() -> None:
    names = {m.__name__ for m in MODULES}
    assert {"jmspy.errors", "jmspy.transports.stomp.receipts",
            "jmspy.broker_ref.core.errors", "jmspy.broker_ref.store.sqlite_store"} <= names
    assert core.DestinationNotFound in EXCEPTIONS and len(EXCEPTIONS) > 25


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_exception_class_is_a_jms_exception(cls: type) -> None:
    assert issubclass(cls, JMSException)


def test_broker_errors_keep_their_own_base_and_are_the_jms_class_they_mean() -> None:
    assert issubclass(core.DestinationNotFound, core.BrokerError)
    assert issubclass(core.DestinationNotFound, InvalidDestinationException)
    assert issubclass(core.AuthenticationFailed, jmspy.JMSSecurityException)
    assert core.ResourceLimitExceeded("full").error_code == "RESOURCE_LIMIT_EXCEEDED"


def test_a_missing_destination_on_the_in_process_broker_host_is_a_jms_exception() -> None:
    """The README's in-process broker block asks the host about a queue nobody made."""
    host = vm.start_broker("error-family-host")
    try:
        with pytest.raises(JMSException) as raised:
            host.stats("orders.eu")
        assert isinstance(raised.value, InvalidDestinationException)
        assert "orders.eu" in str(raised.value)
    finally:
        vm.stop_broker("error-family-host")


def test_a_missing_destination_through_a_vm_connection_is_invalid_destination() -> None:
    vm.start_broker("error-family-conn")
    try:
        with ConnectionFactory("vm://error-family-conn").create_connection() as conn:
            session = conn.create_session()
            with pytest.raises(InvalidDestinationException) as raised:
                conn.destination_stats(session.create_queue("never.made"))
            # the client's class, as over stomp://, not the broker's own
            assert type(raised.value) is InvalidDestinationException
    finally:
        vm.stop_broker("error-family-conn")
