"""The transports' twin modules (see :mod:`jmspy.twins` for what a twin registry is):
``vm://``'s message conversion and send path, and the ``stomp://`` client's MESSAGE
reader, typed as their pure twins here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy import _speedups

__all__ = ["stomp_received", "vm_convert", "vm_send"]

if TYPE_CHECKING:
    from . import vm_convert, vm_send
    from .stomp import received as stomp_received

__getattr__ = _speedups.registry(globals(), __all__)
