"""The core lock around a connection's loop callbacks (``asyncio.Protocol`` methods and
timers), for servers whose broker core other threads call too."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import wraps
from typing import Concatenate, ParamSpec, Protocol, TypeVar

__all__ = ["holding_core"]


class _CoreHolder(Protocol):
    @property
    def shares_core(self) -> bool: ...

    @property
    def core_lock(self) -> AbstractContextManager[object]: ...


class _Served(Protocol):
    @property
    def server(self) -> _CoreHolder: ...


_S = TypeVar("_S", bound=_Served)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def holding_core(
    method: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], _R]:
    """Run a loop callback of a connection with the server's ``core_lock`` held.

    A plain ``jmspy broker`` has nothing to hold (the loop is the core's only thread); a
    connector of an in-process broker shares that broker's lock with its ``vm://``
    connections (:mod:`.connector`). Callbacks nest (``flush`` writes, the write calls
    ``pause_writing``), so the lock is re-entrant there.
    """

    @wraps(method)
    def run(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        server = self.server
        if not server.shares_core:  # nothing to hold: skip the empty context manager
            return method(self, *args, **kwargs)
        with server.core_lock:
            return method(self, *args, **kwargs)

    return run
