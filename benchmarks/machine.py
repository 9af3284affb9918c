"""What of the machine moves the broker rows' figures besides the code: how its idle CPUs
wait.

On a virtual machine whose guest kernel halts an idle vCPU at once (the ``haltpoll`` cpuidle
driver with ``guest_halt_poll_ns`` 0, as on the VM this suite is tuned on), every wakeup of
a thread on an idle vCPU costs an interrupt and a VM entry, paid largely by the thread that
wakes it. On one commit, the jmspy broker's CPU per message fell by 14-30 % on the receipt
rows and by more than half on window 1 between ``guest_halt_poll_ns`` 0 and the kernel's
default of 200,000, and the absolute rates of a full run nearly doubled; with ActiveMQ's JIT
warm, the ratios of the receipt rows hardly moved (figures in benchmarks/README.md, "The
machine's idle CPUs"). Results taken with different settings are not comparable, so every
result file records the setting and the table says it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["cpu_idle", "describe"]


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_idle(sys_root: Path = Path("/sys")) -> dict[str, str]:
    """The cpuidle driver and governor and, with the haltpoll driver, its polling
    parameters (Linux; empty where the kernel does not say)."""
    found: dict[str, str] = {}
    cpuidle = sys_root / "devices/system/cpu/cpuidle"
    for name in ("current_driver", "current_governor", "current_governor_ro"):
        value = _read(cpuidle / name)
        if value is not None:
            found[name.replace("current_", "cpuidle_").replace("_ro", "")] = value
    params = sys_root / "module/haltpoll/parameters"
    for name in ("guest_halt_poll_ns", "guest_halt_poll_grow_start"):
        value = _read(params / name)
        if value is not None:
            found[name] = value
    return found


def describe(idle: dict[str, str]) -> str:
    """One line for the results table: how this machine's idle CPUs wait."""
    if not idle:
        return "CPU idle: not known (no cpuidle information from the kernel)"
    driver = idle.get("cpuidle_driver", "?")
    line = f"CPU idle: cpuidle driver {driver}"
    poll = idle.get("guest_halt_poll_ns")
    if poll is not None:
        line += f", guest_halt_poll_ns {poll}"
        if poll == "0":
            line += (" (an idle vCPU halts at once: each wakeup of a thread on it costs a "
                     "VM entry; compare only results with the same setting, benchmarks/"
                     "README.md, \"The machine's idle CPUs\")")
    return line
