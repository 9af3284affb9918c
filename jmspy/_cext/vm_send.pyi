"""Stub for the compiled twin built from cython_ext/vm_send.pyx: the same Sender as
:mod:`jmspy.transports.vm_send` (the pure twin)."""

from jmspy.transports.vm_send import Sender

__all__ = ["Sender"]
