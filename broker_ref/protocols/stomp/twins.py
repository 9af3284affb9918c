"""The STOMP host's twin modules (see :mod:`jmspy.twins` for what a twin registry is):
the MESSAGE frame writer and the SEND path, typed as their pure twins here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy import _speedups

__all__ = ["stomp_message", "stomp_send"]

if TYPE_CHECKING:
    from . import message_frame as stomp_message
    from . import send_path as stomp_send

__getattr__ = _speedups.registry(globals(), __all__)
