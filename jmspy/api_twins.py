"""The twin modules of the client's API objects: a producer's and a consumer's shared
fields and hot calls, and the session's message constructors (see :mod:`jmspy.twins` for
what a twin registry is).

A registry of their own, above :mod:`jmspy.twins`: these twins build and hold messages,
so they sit above :mod:`jmspy.message`, which itself binds the message record from the
registry below."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _speedups

__all__ = ["message_new", "producer_core"]

if TYPE_CHECKING:
    from jmspy._pure import message_new, producer_core

__getattr__ = _speedups.registry(globals(), __all__)
