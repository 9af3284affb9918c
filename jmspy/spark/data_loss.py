"""Messages of the query's destinations that it can never read: Kafka's ``failOnDataLoss``.

A Kafka topic loses records the query did not read when retention deletes them; a queue
loses messages the query did not read when they expire, or when the broker moves them to
a dead-letter queue (a poison message redelivered past its limit, an expired one under an
AMPS policy). The broker counts both per destination (``expired``, ``deadLettered`` in
``Connection.destination_stats``, which ``jmspy broker`` reports). The reader takes the
counters when it starts, and at every trigger puts what has been lost since into the
offset (``"expired"``, ``"deadLettered"``: running totals across restarts, each run
adding what it saw to the totals of the offset it started from), so
``query.lastProgress`` shows them per batch. What is lost while no query runs is not
seen: the counters are read from the reader's start.
With ``failOnDataLoss=true`` a rise fails the query with the counts; on a broker that
reports no such counters the option is refused at start rather than silently never firing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jmspy.destinations import Destination
from jmspy.errors import JMSException

__all__ = ["COUNTERS", "DataLossError", "LossWatch"]

#: The destination counters that count messages gone unread, and their offset keys.
COUNTERS = ("expired", "deadLettered")


class DataLossError(JMSException):
    """``failOnDataLoss=true`` and messages of the query's destinations were lost."""


class LossWatch:
    """The destinations' loss counters since the reader started (module docstring)."""

    def __init__(self, destinations: Sequence[Destination],
                 stats: Callable[[Destination], Mapping[str, Any]], fail: bool) -> None:
        self._destinations = list(destinations)
        self._stats = stats
        self._fail = fail
        #: the totals the first offset of this run started from (earlier runs' losses)
        self._run_base: dict[str, int] | None = None
        self._base = self._read()
        if self._base is None and fail:
            raise JMSException(
                "jmspy data source: failOnDataLoss=true needs a broker that counts the "
                "messages that expire or are dead-lettered per destination (jmspy broker "
                "does); this broker reports no such counters, so a loss could not be seen. "
                "Leave failOnDataLoss out (or false) here.")

    def _read(self) -> dict[str, int] | None:
        totals = dict.fromkeys(COUNTERS, 0)
        for destination in self._destinations:
            try:
                row = self._stats(destination)
            except JMSException:
                return None
            for key in COUNTERS:
                value = row.get(key)
                if not isinstance(value, int) or isinstance(value, bool):
                    return None
                totals[key] += value
        return totals

    def since_start(self) -> dict[str, int]:
        """What was lost since the reader started ({} where the broker does not say)."""
        if self._base is None:
            return {}
        now = self._read()
        if now is None:
            return {}
        return {key: max(0, now[key] - self._base[key]) for key in COUNTERS}

    def offset_fields(self, start: Mapping[str, Any]) -> dict[str, int]:
        """The loss totals for an offset after ``start``: the totals this run of the
        query began with (its first ``start``, from the checkpoint) plus what this run
        saw; raises :class:`DataLossError` on a rise when asked to."""
        lost = self.since_start()
        if not lost:
            return {}
        before = {key: int(start.get(key, 0)) for key in COUNTERS}
        if self._run_base is None:
            self._run_base = before
        totals = {key: self._run_base[key] + lost[key] for key in COUNTERS}
        if self._fail and any(totals[k] > before[k] for k in COUNTERS):
            raise DataLossError(
                f"jmspy data source: {totals['expired'] - before['expired']} message(s) "
                f"expired and {totals['deadLettered'] - before['deadLettered']} were "
                f"dead-lettered in {', '.join(str(d) for d in self._destinations)} before "
                "this query read them (failOnDataLoss=true). Look in the dead-letter queue "
                "for them, or set failOnDataLoss=false to count such losses in the offsets "
                "(query.lastProgress) and go on.")
        # nothing lost, ever: the offset stays as it was (and equal offsets mean no batch)
        return totals if any(totals.values()) else {}
