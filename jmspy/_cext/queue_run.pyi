"""Stub for the compiled twin built from cython_ext/queue_run.pyx.

Same signatures as :mod:`jmspy.broker_ref.core.queue_run` (the pure twin).
"""

from jmspy.broker_ref.core.queue_run import (
    acknowledge_tags,
    dispatch_fast,
    enqueue,
    route_fast,
    tags_known_once,
    take_run,
)

__all__ = ["acknowledge_tags", "dispatch_fast", "enqueue", "route_fast", "tags_known_once",
           "take_run"]
