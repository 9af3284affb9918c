"""Stub for the compiled twin built from cython_ext/consumer_core.pyx: the same record
as :mod:`jmspy._pure.consumer_core` (the pure twin)."""

from jmspy.consumer_core import FIELDS, ConsumerCore

__all__ = ["FIELDS", "ConsumerCore"]
