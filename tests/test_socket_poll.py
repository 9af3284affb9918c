"""The poll before a STOMP reader sleeps (``transports/socket_poll.py``) on a real
socketpair: readable as soon as a frame (or the peer's close) is there, quiet once the
window ran out on a quiet socket, and contended when a yield gave the CPU to another
process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from jmspy.idle_spin import CONTENDED, QUIET, READABLE
from jmspy.transports.socket_poll import poll_for


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    mine, peer = socket.socketpair()
    yield mine, peer
    mine.close()
    peer.close()


def test_a_waiting_frame_is_readable_at_the_first_look(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    mine, peer = pair
    peer.sendall(b"MESSAGE\n\n\0")
    assert poll_for(mine.fileno(), 0.0) == READABLE  # no window: still one look


def test_a_quiet_socket_is_not_readable_once_the_window_ran_out(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    mine, _ = pair
    assert poll_for(mine.fileno(), 0.0) == QUIET  # one look, no yield
    # 200 us of looks and yields: quiet, unless a yield ran another thread meanwhile
    assert poll_for(mine.fileno(), 0.000_2) in (QUIET, CONTENDED)


def test_the_peer_closing_counts_as_readable_so_the_reader_sees_it(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    mine, peer = pair
    peer.close()
    assert poll_for(mine.fileno(), 0.0) == READABLE


def test_a_frame_written_during_the_window_ends_it_readable(
    pair: tuple[socket.socket, socket.socket],
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
    ended = poll_for(mine.fileno(), 10.0)
    while ended == CONTENDED:  # a yield ran another thread (the writer?): look again
        ended = poll_for(mine.fileno(), 10.0)
    assert ended == READABLE
    writer.join(30)


def test_a_yield_that_runs_another_process_ends_the_window_contended(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """The poller and a process that never sleeps share one CPU (both pinned to it): the
    poller's first yield hands the CPU to that process, which keeps it for its time
    slice, so the window ends contended long before its 30 s, the socket still quiet."""
    mine, _ = pair
    cpu = min(os.sched_getaffinity(0))
    busy = subprocess.Popen(
        [sys.executable, "-c",
         f"import os; os.sched_setaffinity(0, {{{cpu}}}); print(flush=True)\nwhile True: pass"],
        stdout=subprocess.PIPE)
    mask = os.sched_getaffinity(0)
    try:
        assert busy.stdout is not None
        busy.stdout.readline()  # it is pinned and about to spin
        os.sched_setaffinity(0, {cpu})  # this thread only, on Linux
        ended = poll_for(mine.fileno(), 30.0)
    finally:
        os.sched_setaffinity(0, mask)
        busy.kill()
        busy.wait()
        if busy.stdout is not None:
            busy.stdout.close()
    assert ended == CONTENDED
