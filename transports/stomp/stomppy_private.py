"""The one place jmspy touches stomp.py's private state, and only on the stomp.py
releases the tests ran against (:data:`TESTED`; see :mod:`jmspy.transports.library_hooks`).

Two hooks, both set on one transport *instance* before it connects:

* the frame-reading step: stomp.py's receiver loop calls ``self.__read_frames()``, which
  Python spells ``_BaseTransport__read_frames``; an instance attribute of that name is
  found first, so jmspy's codec reads the socket instead of stomp.py's parser
  (:mod:`.receive` says why);
* the socket write lock: stomp.py guards its socket with a ``BoundedSemaphore``
  (``_Transport__socket_semaphore``); a plain ``Lock`` in its place costs less per write
  (:mod:`.wire`).

On any other stomp.py, or with ``JMSPY_LIBRARY_HOOKS=0``, neither is set: stomp.py reads
and locks as it always does (the public path).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from ..library_hooks import hooks_allowed

__all__ = ["READ_STEP", "TESTED", "WRITE_LOCK", "enabled", "replace_read_step",
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


def write_lock(transport: Any) -> Any:
    """The lock stomp.py takes around each socket write on ``transport`` (for tests)."""
    return getattr(transport, WRITE_LOCK)
