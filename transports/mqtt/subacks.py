"""SUBACKs of the mqtt:// transport: a SUBSCRIBE is confirmed (or refused) by the broker's
SUBACK, which paho reports on its network thread while the subscribing thread waits.

:class:`Subacks` owns that hand-over: paho's ``on_subscribe`` (and ``on_unsubscribe``,
whose UNSUBACKs nobody waits for) file each packet's reason codes by packet id, and a
subscriber waits for its own. A SUBACK may arrive before ``subscribe()`` has returned the
packet id, so the codes are kept until asked for rather than handed to a waiter.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .lent_reading import READER_LOOK

__all__ = ["KEPT", "Subacks"]

#: answers kept for a waiter that has not asked yet: the oldest goes past this many (a
#: waiter asks within its timeout, long before 1,024 later packets were acknowledged)
KEPT = 1024


class Subacks:
    """The SUBACKs of one transport, by packet id (see the module docstring)."""

    __slots__ = ("_codes", "_cond", "_need_reader")

    def __init__(self, need_reader: Callable[[], None] = lambda: None) -> None:
        self._cond = threading.Condition()
        self._codes: dict[int, list[Any]] = {}  # packet id -> its reason codes
        #: called before a wait: an event loop holding the reading gives it back, so
        #: paho's thread writes the queued SUBSCRIBE and reads its SUBACK now
        self._need_reader = need_reader

    def on_suback(self, client: Any, userdata: Any, mid: int, codes: Any, props: Any) -> None:
        """paho's ``on_subscribe`` / ``on_unsubscribe`` (its network thread)."""
        with self._cond:
            self._codes[mid] = list(codes) if isinstance(codes, list) else []
            if len(self._codes) > KEPT:  # UNSUBACKs of closed consumers: nobody asks
                del self._codes[next(iter(self._codes))]
            self._cond.notify_all()

    def wait(self, rc: int, mid: int, timeout: float) -> list[Any] | None:
        """The reason codes of the SUBACK for packet ``mid``, or None when it did not come
        within ``timeout`` s or paho could not send the SUBSCRIBE (``rc`` not 0)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            got = rc == 0 and mid in self._codes
            while rc == 0 and not got:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._need_reader()  # the reading may be lent again while it waits
                got = self._cond.wait_for(lambda: mid in self._codes, min(READER_LOOK, left))
            codes = self._codes.pop(mid, [])
        return codes if got else None
