"""The broker core's twins that run above its records (see :mod:`jmspy.twins` for what a
twin registry is): the queue's dispatch loop and the store's page reader, each typed as
its pure twin here in the core.

Apart from :mod:`.twins` (the records) because these two import the records' users
(the consumer, the store's page types): one registry for both would tie the bottom of the
core to its top."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy import _speedups

__all__ = ["page_rows", "queue_run"]

if TYPE_CHECKING:
    from . import page_rows, queue_run

__getattr__ = _speedups.registry(globals(), __all__)
