# cython: language_level=3
"""Sans-I/O STOMP 1.0/1.1/1.2 frame codec, compiled twin (jmspy._cext.stomp_codec).

Mirror of jmspy/_pure/stomp_codec.py, statement for statement: same states, same order of
checks, same error reasons and messages (tests/test_stomp_codec_twins.py compares them with
hypothesis). Change one, change the other. What is compiled is the byte scanning: EOL and
NUL are found with memchr on the bytearray's storage, header names and values are decoded
straight from it, and nothing is sliced per byte. The encoder looks for the four characters
escaping and the EOL checks care about in one pass per header name and value, and touches
only the (rare) ones that hold any. Frame, FrameError, HEARTBEAT and the rare
paths (an undefined escape, content-length validation) are the Python objects of
jmspy.stomp_frames.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr

from jmspy.stomp_frames import (
    CLIENT_COMMANDS,
    HEARTBEAT,
    SERVER_COMMANDS,
    UNESCAPED_COMMANDS,
    VERSIONS,
    CodecLimits,
    Frame,
    FrameError,
    FrameErrorReason,
    parse_content_length,
    unescape_header,
)

__all__ = ["HEARTBEAT", "FrameParser", "encode_frame", "encode_heartbeat"]

cdef enum:
    _COMMAND = 0
    _HEADERS = 1
    _BODY = 2

cdef Py_ssize_t _CLAMP = (<Py_ssize_t>1) << 60

cdef dict _SERVER_SIDE = {c.encode("ascii"): c for c in CLIENT_COMMANDS}
cdef dict _CLIENT_SIDE = {c.encode("ascii"): c for c in SERVER_COMMANDS}
cdef object _Frame = Frame
cdef object _object_new = object.__new__
cdef object _HEARTBEAT = HEARTBEAT
cdef object _unescape = unescape_header
cdef object _R_COMMAND_TOO_LONG = FrameErrorReason.COMMAND_TOO_LONG
cdef object _R_UNKNOWN_COMMAND = FrameErrorReason.UNKNOWN_COMMAND
cdef object _R_HEADERS_TOO_LARGE = FrameErrorReason.HEADERS_TOO_LARGE
cdef object _R_TOO_MANY_HEADERS = FrameErrorReason.TOO_MANY_HEADERS
cdef object _R_HEADER_WITHOUT_COLON = FrameErrorReason.HEADER_WITHOUT_COLON
cdef object _R_EMPTY_HEADER_NAME = FrameErrorReason.EMPTY_HEADER_NAME
cdef object _R_INVALID_UTF8 = FrameErrorReason.INVALID_UTF8
cdef object _R_MISSING_NUL = FrameErrorReason.MISSING_NUL
cdef object _R_BODY_TOO_LARGE = FrameErrorReason.BODY_TOO_LARGE


def _check_version(version):
    if version not in VERSIONS:
        raise ValueError(f"STOMP version must be one of 1.0, 1.1, 1.2; got {version!r}")
    return version


cdef inline Py_ssize_t _clamp(object value):
    return value if value < _CLAMP else _CLAMP


cdef inline Py_ssize_t _find(const char* base, Py_ssize_t start, Py_ssize_t end, char c):
    """Index of ``c`` in base[start:end], or -1 (memchr)."""
    cdef const char* hit
    if start >= end:
        return -1
    hit = <const char*>memchr(base + start, c, <size_t>(end - start))
    return -1 if hit == NULL else hit - base


cdef inline Py_ssize_t _digits(const char* p, Py_ssize_t n):
    """Value of 1 to 18 ASCII digits, else -1 (then the shared validator decides)."""
    cdef Py_ssize_t i, value = 0
    if n < 1 or n > 18:
        return -1
    for i in range(n):
        if p[i] < b"0" or p[i] > b"9":
            return -1
        value = value * 10 + (p[i] - 48)
    return value


cdef object _unescape_bytes(const char* p, Py_ssize_t n, bint v12, str text):
    """``text`` (the UTF-8 decoding of p[:n]) with its STOMP escapes undone, in one C pass
    over the bytes. An escape the spec does not define (or a trailing backslash) goes to
    the shared Python ``unescape_header``, which raises the twins' common error for it.

    Every escape and its replacement is ASCII, so the result is valid UTF-8 when ``text``
    decoded, and the message-ids every broker escapes (``ID\\c...``) cost no Python loop.
    """
    cdef char* out = <char*>PyMem_Malloc(n if n > 0 else 1)
    cdef Py_ssize_t i = 0, m = 0
    cdef char c
    if out == NULL:
        raise MemoryError()
    try:
        while i < n:
            c = p[i]
            if c != b"\\":
                out[m] = c
                m += 1
                i += 1
                continue
            if i + 1 == n:
                return _unescape(text, v12)  # raises: backslash at the end
            c = p[i + 1]
            if c == b"n":
                out[m] = b"\n"
            elif c == b"c":
                out[m] = b":"
            elif c == b"\\":
                out[m] = b"\\"
            elif c == b"r" and v12:
                out[m] = b"\r"
            else:
                return _unescape(text, v12)  # raises: an undefined escape
            m += 1
            i += 2
        return PyUnicode_DecodeUTF8(out, m, NULL)
    finally:
        PyMem_Free(out)


cdef object _new_frame(str command, list headers, bytes body):
    """Frame(command, headers, body) without running the dataclass __init__ in Python.

    Frame is a plain slots record (no __post_init__), so filling the slots is the same.
    """
    cdef object frame = _object_new(_Frame)
    frame.command = command
    frame.headers = headers
    frame.body = body
    return frame


cdef class FrameParser:
    """Turns received bytes into Frame and HEARTBEAT events (see the pure twin's docs)."""

    def __init__(self, version="1.2", limits=None, server=True):
        self._version = _check_version(version)
        self._limits = limits if limits is not None else CodecLimits()
        self._max_frame = _clamp(self._limits.max_frame_bytes)
        self._max_headers = _clamp(self._limits.max_headers)
        self._max_header_bytes = _clamp(self._limits.max_header_bytes)
        self._max_command = _clamp(self._limits.max_command_bytes)
        self._commands = _SERVER_SIDE if server else _CLIENT_SIDE
        self._buf = bytearray()
        self._pos = 0
        self._scan = 0
        self._phase = _COMMAND
        self._error = None
        self._command = ""
        self._headers = []
        self._header_bytes = 0
        self._consumed = 0
        self._content_length = -1
        self._escape = False
        self._v12 = False
        self._trim = False

    @property
    def version(self):
        return self._version

    @property
    def buffered(self):
        """Bytes received and not yet returned as frames or heartbeats.

        Includes the command and header lines of a frame still being read (they are held,
        decoded, until the frame completes).
        """
        return PyByteArray_GET_SIZE(self._buf) - self._pos + self._consumed

    def set_version(self, version):
        self._version = _check_version(version)

    def feed(self, data):
        """Buffer ``data``; parsing happens in next_frame()."""
        if self._error is not None:
            self._raise_again()
        if self._pos:
            # bytearray deletes from the front in O(1): it just moves its start pointer.
            del self._buf[: self._pos]
            self._scan -= self._pos
            self._pos = 0
        self._buf += data

    def next_frame(self):
        """The next frame or heartbeat, or None until more bytes arrive."""
        if self._error is not None:
            self._raise_again()
        try:
            return self._next()
        except FrameError as exc:
            # Kept without its traceback: the traceback's frames hold this parser and its
            # buffer (up to max_frame_bytes), a cycle only the cyclic GC would free.
            self._error = FrameError(exc.reason, exc.detail)
            raise

    cdef int _raise_again(self) except -1:
        raise FrameError(
            self._error.reason, f"parser unusable after earlier error ({self._error})"
        )

    cdef object _next(self):
        cdef bytearray buf = self._buf
        cdef const char* base = PyByteArray_AS_STRING(buf)
        cdef Py_ssize_t size = PyByteArray_GET_SIZE(buf)
        cdef Py_ssize_t pos, nl, end, colon, length
        cdef bytes raw
        cdef str command, name, value
        cdef list headers
        limits = self._limits

        if self._phase == _COMMAND:
            pos = self._pos
            if pos >= size:
                return None
            nl = _find(base, self._scan, size, b"\n")
            if nl < 0:
                if size - pos > self._max_command + 1:
                    raise FrameError(
                        _R_COMMAND_TOO_LONG,
                        f"no EOL within {limits.max_command_bytes} bytes",
                    )
                self._scan = size
                return None
            end = nl
            if end > pos and base[end - 1] == b"\r":
                end -= 1
            if end == pos:
                self._pos = self._scan = nl + 1
                return _HEARTBEAT
            if end - pos > self._max_command:
                raise FrameError(
                    _R_COMMAND_TOO_LONG,
                    f"{end - pos} bytes, limit {limits.max_command_bytes}",
                )
            raw = PyBytes_FromStringAndSize(base + pos, end - pos)
            command = self._commands.get(raw)
            if command is None:
                raise FrameError(_R_UNKNOWN_COMMAND, repr(raw.decode("utf-8", "replace")))
            self._command = command
            self._headers = []
            self._header_bytes = 0
            self._consumed = nl + 1 - pos
            self._content_length = -1
            self._escape = self._version != "1.0" and command not in UNESCAPED_COMMANDS
            self._v12 = self._version == "1.2"
            self._trim = self._version == "1.0"
            self._pos = self._scan = nl + 1
            self._phase = _HEADERS

        if self._phase == _HEADERS:
            headers = self._headers
            while True:
                pos = self._pos
                nl = _find(base, self._scan, size, b"\n")
                if nl < 0:
                    if self._header_bytes + size - pos > self._max_header_bytes:
                        raise FrameError(
                            _R_HEADERS_TOO_LARGE,
                            f"more than {limits.max_header_bytes} bytes",
                        )
                    self._scan = size
                    return None
                self._header_bytes += nl + 1 - pos
                self._consumed += nl + 1 - pos
                if self._header_bytes > self._max_header_bytes:
                    raise FrameError(
                        _R_HEADERS_TOO_LARGE,
                        f"more than {limits.max_header_bytes} bytes",
                    )
                end = nl
                if end > pos and base[end - 1] == b"\r":
                    end -= 1
                self._pos = self._scan = nl + 1
                if end == pos:
                    self._phase = _BODY
                    break
                if len(headers) >= self._max_headers:
                    raise FrameError(_R_TOO_MANY_HEADERS, f"more than {limits.max_headers}")
                colon = _find(base, pos, end, b":")
                if colon < 0:
                    raise FrameError(
                        _R_HEADER_WITHOUT_COLON, repr(bytes(buf[pos : pos + 60]))
                    )
                if colon == pos:
                    raise FrameError(_R_EMPTY_HEADER_NAME, repr(bytes(buf[pos : pos + 60])))
                try:
                    name = PyUnicode_DecodeUTF8(base + pos, colon - pos, NULL)
                    value = PyUnicode_DecodeUTF8(base + colon + 1, end - colon - 1, NULL)
                except UnicodeDecodeError:
                    raise FrameError(
                        _R_INVALID_UTF8, f"in header line {len(headers) + 1}"
                    ) from None
                if self._escape:
                    # "\\" is ASCII and never part of a multi-byte UTF-8 sequence, so
                    # looking in the bytes is looking in the text.
                    if _find(base, pos, colon, b"\\") >= 0:
                        name = _unescape_bytes(base + pos, colon - pos, self._v12, name)
                    if _find(base, colon + 1, end, b"\\") >= 0:
                        value = _unescape_bytes(
                            base + colon + 1, end - colon - 1, self._v12, value)
                elif self._trim:
                    value = value.strip(" \t")
                if self._content_length < 0 and name == "content-length":
                    # fast path for plain digits (then value == raw bytes in every mode)
                    length = _digits(base + colon + 1, end - colon - 1)
                    if 0 <= length <= self._max_frame:
                        self._content_length = length
                    else:
                        self._content_length = parse_content_length(
                            value, limits.max_frame_bytes
                        )
                headers.append((name, value))

        # _BODY
        pos = self._pos
        length = self._content_length
        if length >= 0:
            if size <= pos + length:
                return None
            if base[pos + length] != 0:
                raise FrameError(
                    _R_MISSING_NUL,
                    f"byte 0x{buf[pos + length]:02x} after content-length {length}",
                )
            end = pos + length
        else:
            end = _find(base, self._scan, size, 0)
            if end < 0:
                if size - pos > self._max_frame:
                    raise FrameError(
                        _R_BODY_TOO_LARGE,
                        f"{size - pos} bytes and no NUL yet, "
                        f"max_frame_bytes={limits.max_frame_bytes}",
                    )
                self._scan = size
                return None
            if end - pos > self._max_frame:
                raise FrameError(
                    _R_BODY_TOO_LARGE,
                    f"{end - pos} bytes, max_frame_bytes={limits.max_frame_bytes}",
                )
        frame = _new_frame(
            self._command, self._headers, PyBytes_FromStringAndSize(base + pos, end - pos)
        )
        self._pos = self._scan = end + 1
        self._consumed = 0
        self._phase = _COMMAND
        return frame


def encode_heartbeat():
    """One heart-beat: a bare EOL."""
    return b"\n"


cdef enum:
    _HAS_BACKSLASH = 1
    _HAS_LF = 2
    _HAS_COLON = 4
    _HAS_CR = 8


cdef inline int _specials(str text):
    """Which of backslash, LF, colon, CR occur in ``text`` (one pass; the common header
    has none, and then nothing is replaced or copied)."""
    cdef Py_UCS4 c
    cdef int found = 0
    for c in text:
        if c == u"\\":
            found |= _HAS_BACKSLASH
        elif c == u"\n":
            found |= _HAS_LF
        elif c == u":":
            found |= _HAS_COLON
        elif c == u"\r":
            found |= _HAS_CR
    return found


cdef str _escape_text(str text, int found, bint v12):
    if found & _HAS_BACKSLASH:
        text = text.replace("\\", "\\\\")
    if found & _HAS_LF:
        text = text.replace("\n", "\\n")
    if found & _HAS_COLON:
        text = text.replace(":", "\\c")
    if v12 and found & _HAS_CR:
        text = text.replace("\r", "\\r")
    return text


def encode_frame(frame, version="1.2", content_length=True):
    """Serialise ``frame`` for a session speaking ``version`` (see the pure twin's docs)."""
    command = frame.command
    _check_version(version)
    if command not in CLIENT_COMMANDS and command not in SERVER_COMMANDS:
        raise FrameError(FrameErrorReason.UNKNOWN_COMMAND, repr(command))
    body = frame.body
    cdef bint escape = version != "1.0" and command not in UNESCAPED_COMMANDS
    cdef bint v12 = version == "1.2"
    cdef list parts = [command, "\n"]
    cdef str name, value
    cdef int in_name, in_value
    cdef Py_ssize_t n
    declared = None
    for name, value in frame.headers:
        if not name:
            raise FrameError(FrameErrorReason.EMPTY_HEADER_NAME, f"value {value!r}")
        if value is None:
            raise TypeError(f"header {name!r} has the value None; header values are str")
        if declared is None and name == "content-length":
            declared = value
        in_name = _specials(name)
        in_value = _specials(value)
        if escape:
            if in_name & (_HAS_BACKSLASH | _HAS_LF | _HAS_COLON | (_HAS_CR if v12 else 0)):
                name = _escape_text(name, in_name, v12)
            if in_value & (_HAS_BACKSLASH | _HAS_LF | _HAS_COLON | (_HAS_CR if v12 else 0)):
                value = _escape_text(value, in_value, v12)
        elif in_name & (_HAS_LF | _HAS_COLON):
            raise FrameError(
                FrameErrorReason.UNENCODABLE_HEADER,
                f"name {name!r} has LF or colon and cannot be escaped here",
            )
        elif in_value & _HAS_LF:
            raise FrameError(
                FrameErrorReason.UNENCODABLE_HEADER,
                f"value of {name!r} has LF and cannot be escaped here",
            )
        n = len(value)
        if n and value[n - 1] == u"\r":
            raise FrameError(
                FrameErrorReason.UNENCODABLE_HEADER,
                f"value of {name!r} ends in CR, which would read as part of the EOL",
            )
        parts.append(name)
        parts.append(":")
        parts.append(value)
        parts.append("\n")
    if declared is not None:
        if (
            not declared
            or len(declared) > 18
            or declared.strip("0123456789")
            or int(declared) != len(body)
        ):
            raise FrameError(
                FrameErrorReason.INVALID_CONTENT_LENGTH,
                f"header says {declared!r}, body has {len(body)} bytes",
            )
    elif body and (content_length or b"\0" in body):
        parts.append("content-length:")
        parts.append(str(len(body)))
        parts.append("\n")
    parts.append("\n")
    try:
        head = "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FrameError(FrameErrorReason.INVALID_UTF8, str(exc)) from None
    return b"".join((head, body, b"\0"))
