"""What a broker costs the machine, read from ``/proc`` (Linux): resident memory, its peak,
and CPU time, summed over every process of the broker's session.

Every peer is started in its own session (``start_new_session``), and a broker is not
always one process: RabbitMQ is a shell script that starts ``erl``, which starts
``beam.smp`` (and ``inet_gethost`` helpers), ActiveMQ one JVM, the jmspy broker one
Python process. Summing over the session counts what a user provisions for each, and
nothing of the load generators (other sessions).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def session_pids(sid: int) -> list[int]:
    """The processes whose session id is ``sid`` (the broker's leader's pid)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended while we looked
            continue
        # the command name is in parentheses and may hold spaces: split after it
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid:  # field 6 of stat(5): session
            out.append(int(entry.name))
    return out


def _stat_cpu(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0  # a kernel thread or a zombie: nothing resident


def rss_kb(pid: int) -> int:
    """Resident set size of the one process ``pid`` in KB."""
    kb = _status_kb(pid, "VmRSS:")
    if not kb:
        raise RuntimeError(f"no VmRSS for pid {pid}")
    return kb


@dataclass(frozen=True)
class Sample:
    """The broker's resident KB, peak resident KB (since the last :func:`reset_peak`) and
    CPU seconds (user + system), at one moment."""

    rss_kb: int
    peak_kb: int
    cpu_s: float


def sample(sid: int) -> Sample:
    rss = peak = 0
    cpu = 0.0
    for pid in session_pids(sid):
        try:
            rss += _status_kb(pid, "VmRSS:")
            peak += _status_kb(pid, "VmHWM:")
            cpu += _stat_cpu(pid)
        except OSError:  # ended while we read it
            continue
    return Sample(rss, peak, cpu)


def reset_peak(sid: int) -> None:
    """Start the peak-RSS figure (``VmHWM``) from now: ``5`` to ``clear_refs`` (Linux 4.0+)
    sets it to the current RSS. Best effort: a process we may not write to keeps its
    peak since start, which only overstates."""
    for pid in session_pids(sid):
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
        except OSError:
            continue
