"""Stub for the compiled twin built from cython_ext/stomp_send.pyx: the same SessionRecord
as :mod:`jmspy.broker_ref.protocols.stomp.send_path` (the pure twin)."""

from jmspy.broker_ref.protocols.stomp.send_path import SLOW_HEADERS, SessionRecord

__all__ = ["SLOW_HEADERS", "SessionRecord"]
