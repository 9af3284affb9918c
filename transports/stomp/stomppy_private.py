"""The one place jmspy touches stomp.py's private state, and only on the stomp.py
releases the tests ran against (:data:`TESTED`; see :mod:`jmspy.transports.library_hooks`).

Three hooks, each set on one transport *instance* before it connects:

* the frame-reading step: stomp.py's receiver loop calls ``self.__read_frames()``, which
  Python spells ``_BaseTransport__read_frames``; an instance attribute of that name is
  found first, so jmspy's codec reads the socket instead of stomp.py's parser
  (:mod:`.receive` says why);
* the socket write lock: stomp.py guards its socket with a ``BoundedSemaphore``
  (``_Transport__socket_semaphore``); a plain ``Lock`` in its place costs less per write
  (:mod:`.wire`);
* the connection attempt, over TLS: stomp.py's ``attempt_connection`` connects the TCP
  socket as for plain text, then jmspy runs the TLS handshake over it and puts its own
  TLS stream (:mod:`.owned_tls`) in the transport's ``socket``, so stomp.py stays in
  blocking mode with no send queue and the two hooks above work as on a plain socket.

On any other stomp.py, or with ``JMSPY_LIBRARY_HOOKS=0``, none is set: stomp.py reads
and locks as it always does, and TLS is stomp.py's own ``set_ssl`` (the public path).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from ..library_hooks import hooks_allowed

__all__ = ["READ_STEP", "TESTED", "WRITE_LOCK", "enabled", "own_tls", "replace_read_step",
           "replace_write_lock"]

#: The stomp.py releases (MAJOR.MINOR) these hooks were tested on; pyproject.toml's pin
#: stops after the newest.
TESTED: Final = ("9.0",)

#: stomp.py's names, as Python spells them outside their classes.
READ_STEP: Final = "_BaseTransport__read_frames"
WRITE_LOCK: Final = "_Transport__socket_semaphore"


def enabled() -> bool:
    """Whether the installed stomp.py is a tested one (and hooks are not turned off)."""
    return hooks_allowed("stomp.py", TESTED)


def replace_read_step(transport: Any, read_frames: Callable[[], Any]) -> bool:
    """Make ``read_frames`` stomp.py's frame-reading step on ``transport``. False,
    changing nothing, off a tested stomp.py or where it has no such step."""
    if not enabled() or not callable(getattr(type(transport), READ_STEP, None)):
        return False
    setattr(transport, READ_STEP, read_frames)
    return True


def replace_write_lock(transport: Any) -> bool:
    """Give ``transport`` (not yet connected: no thread can hold the old lock) a
    ``threading.Lock`` as its socket write lock. False, changing nothing, off a tested
    stomp.py or where it has no such semaphore."""
    if not enabled() or not isinstance(getattr(transport, WRITE_LOCK, None),
                                       threading.BoundedSemaphore):
        return False
    setattr(transport, WRITE_LOCK, threading.Lock())
    return True


def own_tls(transport: Any, secure: Callable[[Any], Any]) -> bool:
    """After each TCP connect of ``transport`` (not yet connected), replace its plain
    socket with ``secure(socket)`` -- the socket after jmspy's TLS handshake. If that
    raises, the socket is closed and forgotten and the error goes to whoever connected
    (nothing was sent in plain text). False, changing nothing, off a tested stomp.py or
    where the transport has no such step."""
    attempt = getattr(transport, "attempt_connection", None)
    if not enabled() or not callable(attempt) or not hasattr(transport, "socket"):
        return False

    def attempt_connection() -> None:
        attempt()
        raw = transport.socket
        if raw is None:
            return
        try:
            transport.socket = secure(raw)
        except BaseException:
            transport.socket = None
            raw.close()
            raise

    transport.attempt_connection = attempt_connection
    return True


def write_lock(transport: Any) -> Any:
    """The lock stomp.py takes around each socket write on ``transport`` (for tests)."""
    return getattr(transport, WRITE_LOCK)
