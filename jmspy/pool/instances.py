"""Listener instances of a worker pool: what a listener is, and one fresh instance per
worker, like an MDB bean (an application server never shares a bean instance between two
concurrent deliveries).

A listener is a class (instantiated once per worker; its ``on_message(message)`` or
``__call__(message)`` handles one message), a plain callable (shared: a function has no
state to protect), or the same as an importable ``"module:attribute"`` string, which is
what a process worker needs (it imports the listener itself).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from jmspy.errors import InvalidConfigurationException, JMSException
from jmspy.message import Message

__all__ = ["Handler", "ListenerSpec", "WorkerDied", "handler_of", "load_listener"]

class WorkerDied(JMSException):
    """A process worker died while it handled a message (raised by its handler): the
    pool replaces the process and delivers the message again, marked redelivered."""


#: What handles one message.
Handler = Callable[[Message], object]
#: What a pool is given: a class, a callable, or "module:attribute".
ListenerSpec = str | type | Callable[[Message], object]


def load_listener(spec: ListenerSpec) -> Callable[[], Handler]:
    """A factory of fresh handlers for ``spec`` (see the module docstring)."""
    target: Any = spec
    if isinstance(spec, str):
        module_name, sep, attr = spec.partition(":")
        if not sep or not module_name or not attr:
            raise InvalidConfigurationException(
                f"listener {spec!r} must be 'module:attribute' (e.g. 'myapp.jobs:Handler')")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise InvalidConfigurationException(
                f"listener {spec!r}: cannot import {module_name!r} ({exc}); is it on "
                "PYTHONPATH?") from exc
        target = module
        for part in attr.split("."):
            try:
                target = getattr(target, part)
            except AttributeError:
                raise InvalidConfigurationException(
                    f"listener {spec!r}: {module_name!r} has no attribute {attr!r}") from None
    if isinstance(target, type):
        cls = target
        if not (callable(getattr(cls, "on_message", None)) or callable(cls.__call__)):
            raise InvalidConfigurationException(
                f"listener class {cls.__name__} needs an on_message(message) method")
        return lambda: handler_of(cls())
    if not callable(target):
        raise InvalidConfigurationException(
            f"listener {spec!r} is neither a class nor a callable")
    handler = handler_of(target)
    return lambda: handler


def handler_of(instance: Any) -> Handler:
    """The callable that handles one message with ``instance``."""
    on_message = getattr(instance, "on_message", None)
    if callable(on_message):
        return on_message  # type: ignore[no-any-return]
    if callable(instance):
        return instance  # type: ignore[no-any-return]
    raise InvalidConfigurationException(
        f"listener {instance!r} has no on_message(message) method and is not callable")
