"""Stub for the compiled twin built from cython_ext/message_record.pyx: the same record as
:mod:`jmspy._pure.message_record` (the pure twin), with typed fields."""

from jmspy._pure.message_record import FIELDS, MessageRecord

__all__ = ["FIELDS", "MessageRecord"]
