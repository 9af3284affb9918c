"""Stub for the compiled twin built from cython_ext/produce.pyx.

Same signature as :func:`jmspy._pure.produce.send_plain`.
"""

from jmspy.message import Message
from jmspy.producer import MessageProducer

__all__ = ["send_plain"]

def send_plain(producer: MessageProducer, message: Message) -> None: ...
