"""MDB-like worker pools (seed 004): many listener instances on one connection and one
consumer. See :mod:`.pool`."""

from __future__ import annotations

from .activation import ActivationSpec
from .pool import DEAD_LETTER_REASON, WorkerPool

__all__ = ["DEAD_LETTER_REASON", "ActivationSpec", "WorkerPool"]
