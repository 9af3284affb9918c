"""The broker core's twin modules (see :mod:`jmspy.twins` for what a twin registry is):
its records, its queue's dispatch loop and the store's page reader, each typed as its
pure twin here in the core."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy import _speedups

__all__ = ["page_rows", "queue_run", "records"]

if TYPE_CHECKING:
    from . import page_rows, queue_run, records

__getattr__ = _speedups.registry(globals(), __all__)
