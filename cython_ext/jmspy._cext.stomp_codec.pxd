# Typed interface of the compiled STOMP frame codec (jmspy._cext.stomp_codec).
# Named after the full module name because setup.py builds cython_ext/stomp_codec.pyx as
# jmspy._cext.stomp_codec and Cython looks the .pxd up by that name.
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
