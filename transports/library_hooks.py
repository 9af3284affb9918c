"""Whether a client library's private hooks may be used: only on the versions the tests
ran against, never on another.

jmspy drives stomp.py and paho-mqtt through their public API. Where it reaches past it
for speed (stomp.py's frame-reading step and socket lock; paho's socket reads, packet
queue and PUBLISH/PUBACK handlers), the code that does lives in one adapter per library
(:mod:`jmspy.transports.stomp.stomppy_private`, :mod:`jmspy.transports.mqtt.paho_private`),
which names its library's tested versions once. Any other installed version takes the
public path: slower, same behaviour, and it cannot break when a release renames what it
never touched. ``JMSPY_LIBRARY_HOOKS=0`` takes the public path on every version (the
pure-twin test run does, so CI tests both paths).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import cache
from importlib import metadata

__all__ = ["hooks_allowed", "installed_version"]


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _release(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
        if digits != piece:  # "0rc1": a pre-release of this number; stop here
            break
    return tuple(parts)


@cache
def hooks_allowed(distribution: str, tested: tuple[str, ...]) -> bool:
    """Whether the installed ``distribution`` is one of the ``tested`` releases (each
    ``"MAJOR.MINOR"``: any patch release of it) and ``JMSPY_LIBRARY_HOOKS`` is not ``0``."""
    if os.environ.get("JMSPY_LIBRARY_HOOKS", "") == "0":
        return False
    version = installed_version(distribution)
    return version is not None and _matches(version, tested)


def _matches(version: str, tested: Iterable[str]) -> bool:
    release = _release(version)
    return any(release[:2] == _release(line)[:2] and len(release) >= 2 for line in tested)
