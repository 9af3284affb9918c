"""The one place jmspy touches paho-mqtt's private state, and only on the paho releases
the tests ran against (:data:`TESTED`; see :mod:`jmspy.transports.library_hooks`).

Four steps of one client *instance* become jmspy's, each in its module with the
measurements that justify it, each leaving paho's step in place where it cannot apply:
decoding a received PUBLISH (:mod:`.publish_read`), reading a received PUBACK
(:mod:`.puback`), writing a QoS 1 PUBLISH or a PUBACK on the thread that makes it and
joining queued ones into one write (:mod:`.direct_write`), and reading the socket a block
at a time (:mod:`.buffered_read`). On any other paho, or with ``JMSPY_LIBRARY_HOOKS=0``,
:func:`install` sets none of them: paho runs as it always does (the public path).
"""

from __future__ import annotations

from typing import Any, Final

from ...library_hooks import hooks_allowed
from .buffered_read import install as install_buffered_reads
from .direct_write import install as install_direct_writes
from .puback import install as install_puback_reader
from .publish_read import install as install_publish_decoder

__all__ = ["TESTED", "enabled", "install"]

#: The paho-mqtt releases (MAJOR.MINOR) these hooks were tested on; pyproject.toml's pin
#: stops after the newest.
TESTED: Final = ("2.2",)


def enabled() -> bool:
    """Whether the installed paho-mqtt is a tested one (and hooks are not turned off)."""
    return hooks_allowed("paho-mqtt", TESTED)


def install(client: Any) -> dict[str, bool]:
    """Put jmspy's steps in place on paho ``client`` (before it connects), on a tested
    paho only; which of them took (each declines where it cannot apply)."""
    names = ("publish_read", "puback", "direct_write", "buffered_read")
    if not enabled():
        return dict.fromkeys(names, False)
    return dict(zip(names, (install_publish_decoder(client), install_puback_reader(client),
                            install_direct_writes(client), install_buffered_reads(client)),
                    strict=True))
