# cython: language_level=3, auto_pickle=False
"""A client Message's fields with typed C access (compiled twin).

The pure twin ``jmspy/_pure/message_record.py`` says what the record is and why it is a
twin; the fields are declared in ``jmspy/_cext/message_record.pxd``. Pickling and copying
are ``Message``'s (``__reduce__``/``__copy__`` over :data:`FIELDS`), so both twins do them
the same way. The fields are declared in the order of :data:`FIELDS` (checked at load).
"""

from jmspy._cext.members cimport check_members, expose_members, member_indices

from jmspy._pure.message_record import FIELDS

__all__ = ["FIELDS", "MessageRecord"]

#: the field each branch of get_property reads (checked: an application may delete one)
cdef tuple _READ_COUNT = member_indices(FIELDS, ("delivery_count",))
cdef tuple _READ_PROPERTIES = member_indices(FIELDS, ("_properties",))


cdef class MessageRecord:
    """A message's headers, properties, body and delivery bookkeeping, and reading a
    property; see the pure twin."""

    def get_property(self, name):
        """The property's value, or None when it is absent."""
        if name == "JMSXDeliveryCount":
            check_members(self, FIELDS, _READ_COUNT)
            return self.delivery_count
        check_members(self, FIELDS, _READ_PROPERTIES)
        return self._properties.get(name)


# Python code (the client's, the application's listener) reads these per message: as
# fast as the pure twin's slots (jmspy/_cext/members.pxd says why).
expose_members(MessageRecord, FIELDS)
