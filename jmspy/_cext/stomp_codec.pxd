# Typed interface of the compiled STOMP frame codec (jmspy._cext.stomp_codec).
# It lives beside the .pyi, where Cython finds it by the module's qualified name
# (jmspy._cext.stomp_codec) on the include path setup.py passes.
# Pure twin: jmspy/_pure/stomp_codec.py; user-facing types: jmspy/_cext/stomp_codec.pyi.

cdef class FrameParser:
    cdef str _version
    cdef object _limits
    cdef Py_ssize_t _max_frame
    cdef Py_ssize_t _max_headers
    cdef Py_ssize_t _max_header_bytes
    cdef Py_ssize_t _max_command
    cdef dict _commands
    cdef bytearray _buf
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _scan
    cdef int _phase
    cdef object _error
    # the frame being read
    cdef str _command
    cdef list _headers
    cdef Py_ssize_t _header_bytes
    cdef Py_ssize_t _consumed  # command + header bytes of the frame being read
    cdef Py_ssize_t _content_length
    cdef bint _escape
    cdef bint _v12
    cdef bint _trim

    cdef object _next(self)
    cdef int _raise_again(self) except -1
