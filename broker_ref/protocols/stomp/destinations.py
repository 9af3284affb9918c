"""Which core destination each STOMP destination header of one session names, and back.

A client names its destination in every SEND and SUBSCRIBE, and uses few: each text is
parsed once and remembered (the memory is bounded, so a client cycling through names
cannot grow it). ``/temp-queue/NAME`` is different: the name is the client's, local to
its connection, and the core queue is created on first use, so it is never cached with
the rest; its core name is kept both ways, so that MESSAGE frames (their destination and
reply-to) show the client its own name again (:func:`~.mapping.render_destination`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ...core import DestinationKind
from . import mapping
from .mapping import Target

__all__ = ["SessionDestinations"]

#: Most destination headers a session remembers parsed (then it starts over).
_TARGET_CACHE = 256


class SessionDestinations:
    """The destination names of one STOMP session (see the module docstring).

    ``create_temp`` creates a temporary queue of the session's core connection and
    returns its core name."""

    __slots__ = ("_create_temp", "_local_temps", "_targets", "_temps", "local_temps")

    def __init__(self, create_temp: Callable[[], str]) -> None:
        self._create_temp = create_temp
        self._targets: dict[str, Target] = {}  # destination header -> parsed (not temp)
        self._temps: dict[str, str] = {}  # client name -> core temp queue name
        self._local_temps: dict[str, str] = {}  # core name -> client name
        #: core temp queue name -> the client's name: what rendering a destination reads
        self.local_temps: Mapping[str, str] = self._local_temps

    def target(self, text: str | None) -> Target:
        """The core destination of a STOMP destination header (``None``: the header is
        missing, refused by :func:`~.mapping.parse_destination`)."""
        if text is not None:
            cached = self._targets.get(text)
            if cached is not None:
                return cached
        target = mapping.parse_destination(text)
        if target.temp:  # per connection, and created on first use: never cached
            core = self._temps.get(target.name)
            if core is None:
                core = self._create_temp()
                self._temps[target.name] = core
                self._local_temps[core] = target.name
            return Target(DestinationKind.QUEUE, core)
        if text is not None:
            if len(self._targets) >= _TARGET_CACHE:
                self._targets.clear()
            self._targets[text] = target
        return target

    def cached(self, text: str) -> Target | None:
        """The core destination of a header text already parsed by :meth:`target`, or
        None (never parsed, forgotten, or a temp queue, which is never cached)."""
        return self._targets.get(text)

    def reply(self, text: str) -> tuple[DestinationKind, str]:
        """A ``reply-to`` header as the core's (kind, name)."""
        t = self.target(text)
        return t.kind, t.name
