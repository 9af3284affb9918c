"""The broker core's lowest twin (see :mod:`jmspy.twins` for what a twin registry is):
its records, typed as their pure twin here in the core.

The records sit at the bottom of the core, below :mod:`.api`, which hands out their
message class; the twins that run on top of the queue and the store (the dispatch loop,
the page reader) are in :mod:`.run_twins`, so that naming the records never makes the
bottom of the core depend on the queue's run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy import _speedups

__all__ = ["records"]

if TYPE_CHECKING:
    from . import records

__getattr__ = _speedups.registry(globals(), __all__)
