"""What the asyncio tests share: a fresh in-process broker per test and a runner that
bounds a failing test (the bound never decides a passing one)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from jmspy.aio import AsyncConnectionFactory

T = TypeVar("T")

#: how long a failing test may hang before it is reported
GUARD = 60.0


def run(main: Callable[[], Awaitable[T]], *, debug: bool = False,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> T:
    async def guarded() -> T:
        async with asyncio.timeout(GUARD):
            return await main()

    with asyncio.Runner(debug=debug, loop_factory=loop_factory) as runner:
        return runner.run(guarded())


@contextmanager
def vm_factory(broker: dict[str, Any] | None = None, **properties: Any
               ) -> Iterator[AsyncConnectionFactory]:
    """A fresh in-process broker (``broker``: its core options) and a factory for it."""
    from jmspy.transports import vm

    name = f"aio-{uuid.uuid4().hex[:12]}"
    vm.start_broker(name, **(broker or {}))
    try:
        yield AsyncConnectionFactory(f"vm://{name}", **properties)
    finally:
        vm.stop_broker(name)
