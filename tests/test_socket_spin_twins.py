"""The poll-before-sleep twins (``jmspy._cext.socket_spin``, ``jmspy._pure.socket_spin``)
on a real socketpair: both say readable as soon as a frame (or the peer's close) is
there, and not readable once the window ran out on a quiet socket."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from types import ModuleType

import pytest

import jmspy._cext.socket_spin as cext
import jmspy._pure.socket_spin as pure

TWINS = [pytest.param(cext, id="compiled"), pytest.param(pure, id="pure")]


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    mine, peer = socket.socketpair()
    yield mine, peer
    mine.close()
    peer.close()


@pytest.mark.parametrize("twin", TWINS)
def test_a_waiting_frame_is_readable_at_the_first_look(
    twin: ModuleType, pair: tuple[socket.socket, socket.socket],
) -> None:
    mine, peer = pair
    peer.sendall(b"MESSAGE\n\n\0")
    assert twin.poll_for(mine.fileno(), 0.0) is True  # no window: still one look


@pytest.mark.parametrize("twin", TWINS)
def test_a_quiet_socket_is_not_readable_once_the_window_ran_out(
    twin: ModuleType, pair: tuple[socket.socket, socket.socket],
) -> None:
    mine, _ = pair
    assert twin.poll_for(mine.fileno(), 0.0) is False
    assert twin.poll_for(mine.fileno(), 0.000_2) is False


@pytest.mark.parametrize("twin", TWINS)
def test_the_peer_closing_counts_as_readable_so_the_reader_sees_it(
    twin: ModuleType, pair: tuple[socket.socket, socket.socket],
) -> None:
    mine, peer = pair
    peer.close()
    assert twin.poll_for(mine.fileno(), 0.0) is True


@pytest.mark.parametrize("twin", TWINS)
def test_a_frame_written_during_the_window_ends_it_readable(
    twin: ModuleType, pair: tuple[socket.socket, socket.socket],
) -> None:
    """The window is long (10 s) and the writer starts only once the poller is in it
    (it waits for the first look to have passed): only the frame can end it early."""
    mine, peer = pair
    started = threading.Event()

    def write_when_polling() -> None:
        started.wait(30)
        peer.sendall(b"MESSAGE\n\n\0")

    writer = threading.Thread(target=write_when_polling)
    writer.start()
    started.set()
    assert twin.poll_for(mine.fileno(), 10.0) is True
    writer.join(30)


def test_the_compiled_twin_leaves_the_gil_to_other_threads_while_it_polls(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """With the interpreter's switch interval longer than the window, a thread waiting
    for the GIL gets it only if the poller lets go: the writer, which needs the GIL to
    run at all, ends the window with its frame only because the window runs without it
    (a poller holding the GIL would see its 2 s run out first and return False)."""
    mine, peer = pair

    def write_later() -> None:
        time.sleep(0.2)  # lets the main thread get into its window; waking needs the GIL
        peer.sendall(b"MESSAGE\n\n\0")

    writer = threading.Thread(target=write_later)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    try:
        writer.start()
        readable = cext.poll_for(mine.fileno(), 2.0)
    finally:
        sys.setswitchinterval(interval)
    writer.join(30)
    assert readable is True
