"""benchmarks.machine: how the machine's idle CPUs wait, read from sysfs and said in one
line beside the results (it moves the broker rows' absolute figures more than most code
changes)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmarks import machine


def _sysfs(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return root


def test_a_vm_that_halts_idle_cpus_at_once_is_named_as_such(tmp_path: Path) -> None:
    root = _sysfs(tmp_path, {
        "devices/system/cpu/cpuidle/current_driver": "haltpoll",
        "devices/system/cpu/cpuidle/current_governor_ro": "haltpoll",
        "module/haltpoll/parameters/guest_halt_poll_ns": "0",
        "module/haltpoll/parameters/guest_halt_poll_grow_start": "50000",
    })
    idle = machine.cpu_idle(root)
    assert idle == {"cpuidle_driver": "haltpoll", "cpuidle_governor": "haltpoll",
                    "guest_halt_poll_ns": "0", "guest_halt_poll_grow_start": "50000"}
    line = machine.describe(idle)
    assert line.startswith("CPU idle: cpuidle driver haltpoll, guest_halt_poll_ns 0")
    assert "halts at once" in line


def test_a_polling_vm_is_described_without_the_warning(tmp_path: Path) -> None:
    root = _sysfs(tmp_path, {
        "devices/system/cpu/cpuidle/current_driver": "haltpoll",
        "module/haltpoll/parameters/guest_halt_poll_ns": "200000",
    })
    line = machine.describe(machine.cpu_idle(root))
    assert line == "CPU idle: cpuidle driver haltpoll, guest_halt_poll_ns 200000"


def test_a_machine_without_haltpoll_gives_its_driver_only(tmp_path: Path) -> None:
    root = _sysfs(tmp_path, {"devices/system/cpu/cpuidle/current_driver": "intel_idle"})
    assert machine.describe(machine.cpu_idle(root)) == "CPU idle: cpuidle driver intel_idle"


def test_a_kernel_that_says_nothing_gives_an_empty_record(tmp_path: Path) -> None:
    assert machine.cpu_idle(tmp_path) == {}
    assert "not known" in machine.describe({})
