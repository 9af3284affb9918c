"""Stub for the compiled twin built from cython_ext/deliver.pyx.

Same signature as :func:`jmspy._pure.deliver.deliver_run`.
"""

from jmspy.connection import Connection
from jmspy.message import Message

__all__ = ["deliver_run"]

def deliver_run(
    conn: Connection, consumer_id: int, first_tag: int, messages: list[Message]
) -> None: ...
