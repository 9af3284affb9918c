# cython: language_level=3
"""A client Message's fields as a typed C struct (the compiled twin of
jmspy/_pure/message_record.py, whose docstring says why).

Declared once, here; ``cython_ext/message_record.pyx`` implements the record and the
compiled twins that build or read messages (vm_convert, message_new, dispatch) cimport it
to reach the fields directly. Every field is an object, as in the pure twin: both accept
the same values. After editing, touch every .pyx that cimports it.
"""


cdef class MessageRecord:
    cdef public object message_id
    cdef public object timestamp
    cdef public object correlation_id
    cdef public object reply_to
    cdef public object destination
    cdef public object delivery_mode
    cdef public object expiration
    cdef public object priority
    cdef public object redelivered
    cdef public object jms_type
    cdef public object delivery_time
    cdef public object delivery_count
    cdef public object _properties
    cdef public object _props_read_only
    cdef public object _body_read_only
    cdef public object _acknowledger
    cdef public object _delivery_tag
    cdef public object _body
