"""The transports' twin modules (see :mod:`jmspy.twins` for what a twin registry is):
``vm://``'s message conversion and send path, typed as their pure twins here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy import _speedups

__all__ = ["vm_convert", "vm_send"]

if TYPE_CHECKING:
    from . import vm_convert, vm_send

__getattr__ = _speedups.registry(globals(), __all__)
