"""Fixtures: a live STOMP server on 127.0.0.1:<free port> (see stomp_support), and
stomp.py clients that are disconnected after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import stomp
from stomp_support import Collector, ServerHandle


@pytest.fixture
def server_factory() -> Iterator[Callable[..., ServerHandle]]:
    handles: list[ServerHandle] = []

    def make(**options: Any) -> ServerHandle:
        h = ServerHandle(**options)
        handles.append(h)
        return h

    yield make
    for h in handles:
        h.stop()


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[ServerHandle]:
    """One server for a whole module (hypothesis calls the test many times)."""
    h = ServerHandle()
    yield h
    h.stop()


@pytest.fixture
def server(server_factory: Callable[..., ServerHandle]) -> ServerHandle:
    return server_factory()


@pytest.fixture(params=["vm", "stomp"])
def bundled(request: pytest.FixtureRequest, vm_factory: Any,
            server_factory: Callable[..., ServerHandle]) -> Callable[..., Any]:
    """``bundled(**properties)``: a ConnectionFactory for this test's fresh bundled broker,
    once over ``vm://`` and once over ``stomp://`` (the two must behave alike)."""
    from jmspy import ConnectionFactory

    if request.param == "vm":
        url = vm_factory.url
    else:
        handle = server_factory()
        url = f"stomp://{handle.host}:{handle.port}"
    return lambda **properties: ConnectionFactory(url, **properties)


def _open(h: ServerHandle, version: str = "1.2", heartbeats: tuple[int, int] = (0, 0),
          **headers: str) -> tuple[Any, Collector]:
    """A stomp.py connection to ``h``, CONNECTed, with a Collector as its listener."""
    cls = {"1.0": stomp.Connection10, "1.1": stomp.Connection11,
           "1.2": stomp.Connection12}[version]
    kwargs: dict[str, Any] = {} if version == "1.0" else {"heartbeats": heartbeats}
    conn = cls([(h.host, h.port)], **kwargs)
    listener = Collector()
    conn.set_listener("c", listener)
    conn.connect(wait=True, headers={"host": "/", **headers})
    return conn, listener


@pytest.fixture
def connect(server: ServerHandle) -> Iterator[Callable[..., tuple[Any, Collector]]]:
    """connect(version="1.2", heartbeats=(0, 0), **headers) -> (stomp connection, Collector)."""
    conns: list[Any] = []

    def make(
        version: str = "1.2",
        heartbeats: tuple[int, int] = (0, 0),
        handle: ServerHandle | None = None,
        **headers: str,
    ) -> tuple[Any, Collector]:
        conn, listener = _open(handle or server, version, heartbeats, **headers)
        conns.append(conn)
        return conn, listener

    yield make
    for conn in conns:
        if conn.is_connected():
            try:
                conn.disconnect()
            except Exception:
                pass



@pytest.fixture
def raw() -> Iterator[Callable[[ServerHandle], tuple[Any, Collector]]]:
    """raw(handle) -> a STOMP 1.2 stomp.py connection to ``handle`` and its Collector (for a
    test that makes its own servers); each is disconnected after the test."""
    made: list[Any] = []

    def make(h: ServerHandle) -> tuple[Any, Collector]:
        conn, listener = _open(h)
        made.append(conn)
        return conn, listener

    yield make
    for conn in made:
        try:
            conn.disconnect()
        except Exception:
            pass  # closed by the broker after an ERROR, or already gone
