"""The broker core's twin that runs above its records (see :mod:`jmspy.twins` for what a
twin registry is): the queue's dispatch loop, typed as its pure twin here in the core.

Apart from :mod:`.twins` (the records) because the loop imports the records' users (the
consumer): one registry for both would tie the bottom of the core to its top. The store's
page reader has the store's registry (:mod:`jmspy.broker_ref.store.twins`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy import _speedups

__all__ = ["queue_run"]

if TYPE_CHECKING:
    from . import queue_run

__getattr__ = _speedups.registry(globals(), __all__)
