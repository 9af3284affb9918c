"""What an asynchronous send reports to: JMS 2.0's ``CompletionListener``, or a plain
callable.

Its own module, below the producer: the producer's twin core (``jmspy/_pure/
producer_core.py``), which the producer derives from, and the connection, which runs the
callbacks, both name it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from .message import Message

__all__ = ["CompletionCallback", "CompletionListener"]


@runtime_checkable
class CompletionListener(Protocol):
    """JMS 2.0 asynchronous send callback (called on a jmspy thread, never the sender's)."""

    def on_completion(self, message: Message) -> None: ...

    def on_exception(self, message: Message, exception: Exception) -> None: ...


#: A CompletionListener, or a callable ``f(message, exception_or_None)``.
CompletionCallback = CompletionListener | Callable[[Message, Exception | None], Any]
