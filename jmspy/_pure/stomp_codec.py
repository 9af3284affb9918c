"""Sans-I/O STOMP 1.0/1.1/1.2 frame codec, pure-Python twin.

``cython_ext/stomp_codec.pyx`` is the compiled twin; the two must behave identically down
to the error reason and message (tests/test_stomp_codec_twins.py checks it with
hypothesis). Change one, change the other. Shared vocabulary and the spec choices are in
:mod:`jmspy.stomp_frames`.

The parser is an incremental state machine over one ``bytearray``: ``_pos`` is where the
unconsumed data starts, ``_scan`` where the next EOL/NUL search resumes (so feeding one byte
at a time stays linear), ``_phase`` what we are reading. Every limit is checked on partial
data too, and an error depends only on the bytes, never on how they were chunked.
"""

from __future__ import annotations

from typing import Final

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
    Heartbeat,
    parse_content_length,
    unescape_header,
)

__all__ = ["HEARTBEAT", "FrameParser", "encode_frame", "encode_heartbeat"]

_COMMAND: Final = 0
_HEADERS: Final = 1
_BODY: Final = 2

_LF: Final = 0x0A
_CR: Final = 0x0D

_SERVER_SIDE: Final = {c.encode("ascii"): c for c in CLIENT_COMMANDS}
_CLIENT_SIDE: Final = {c.encode("ascii"): c for c in SERVER_COMMANDS}


def _check_version(version: str) -> str:
    if version not in VERSIONS:
        raise ValueError(f"STOMP version must be one of 1.0, 1.1, 1.2; got {version!r}")
    return version


class FrameParser:
    """Turns received bytes into :class:`Frame` and :data:`HEARTBEAT` events.

    ``server=True`` parses what a client sends (CONNECT, SEND, ...), ``server=False`` what a
    server sends (CONNECTED, MESSAGE, RECEIPT, ERROR). Call :meth:`set_version` once the
    version is negotiated; it applies from the next frame on.
    """

    def __init__(
        self, version: str = "1.2", limits: CodecLimits | None = None, server: bool = True
    ) -> None:
        self._version = _check_version(version)
        self._limits = limits if limits is not None else CodecLimits()
        self._commands = _SERVER_SIDE if server else _CLIENT_SIDE
        self._buf = bytearray()
        self._pos = 0
        self._scan = 0
        self._phase = _COMMAND
        self._error: FrameError | None = None
        # the frame being read
        self._command = ""
        self._headers: list[tuple[str, str]] = []
        self._header_bytes = 0
        self._consumed = 0
        self._content_length = -1
        self._escape = False
        self._v12 = False
        self._trim = False

    @property
    def version(self) -> str:
        return self._version

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames or heartbeats.

        Includes the command and header lines of a frame still being read (they are held,
        decoded, until the frame completes).
        """
        return len(self._buf) - self._pos + self._consumed

    def set_version(self, version: str) -> None:
        self._version = _check_version(version)

    def feed(self, data: bytes) -> None:
        """Buffer ``data``; parsing happens in :meth:`next_frame`."""
        if self._error is not None:
            self._raise_again()
        if self._pos:
            # bytearray deletes from the front in O(1): it just moves its start pointer.
            del self._buf[: self._pos]
            self._scan -= self._pos
            self._pos = 0
        self._buf += data

    def next_frame(self) -> Frame | Heartbeat | None:
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

    def _raise_again(self) -> None:
        assert self._error is not None
        raise FrameError(self._error.reason, f"parser unusable after earlier error ({self._error})")

    def _next(self) -> Frame | Heartbeat | None:
        buf = self._buf
        size = len(buf)
        limits = self._limits
        if self._phase == _COMMAND:
            pos = self._pos
            if pos >= size:
                return None
            nl = buf.find(b"\n", self._scan)
            if nl < 0:
                if size - pos > limits.max_command_bytes + 1:
                    raise FrameError(
                        FrameErrorReason.COMMAND_TOO_LONG,
                        f"no EOL within {limits.max_command_bytes} bytes",
                    )
                self._scan = size
                return None
            end = nl
            if end > pos and buf[end - 1] == _CR:
                end -= 1
            if end == pos:
                self._pos = self._scan = nl + 1
                return HEARTBEAT
            if end - pos > limits.max_command_bytes:
                raise FrameError(
                    FrameErrorReason.COMMAND_TOO_LONG,
                    f"{end - pos} bytes, limit {limits.max_command_bytes}",
                )
            raw = bytes(buf[pos:end])
            command = self._commands.get(raw)
            if command is None:
                raise FrameError(
                    FrameErrorReason.UNKNOWN_COMMAND, repr(raw.decode("utf-8", "replace"))
                )
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
                nl = buf.find(b"\n", self._scan)
                if nl < 0:
                    if self._header_bytes + size - pos > limits.max_header_bytes:
                        raise FrameError(
                            FrameErrorReason.HEADERS_TOO_LARGE,
                            f"more than {limits.max_header_bytes} bytes",
                        )
                    self._scan = size
                    return None
                self._header_bytes += nl + 1 - pos
                self._consumed += nl + 1 - pos
                if self._header_bytes > limits.max_header_bytes:
                    raise FrameError(
                        FrameErrorReason.HEADERS_TOO_LARGE,
                        f"more than {limits.max_header_bytes} bytes",
                    )
                end = nl
                if end > pos and buf[end - 1] == _CR:
                    end -= 1
                self._pos = self._scan = nl + 1
                if end == pos:
                    self._phase = _BODY
                    break
                if len(headers) >= limits.max_headers:
                    raise FrameError(
                        FrameErrorReason.TOO_MANY_HEADERS, f"more than {limits.max_headers}"
                    )
                colon = buf.find(b":", pos, end)
                if colon < 0:
                    raise FrameError(
                        FrameErrorReason.HEADER_WITHOUT_COLON, repr(bytes(buf[pos : pos + 60]))
                    )
                if colon == pos:
                    raise FrameError(
                        FrameErrorReason.EMPTY_HEADER_NAME, repr(bytes(buf[pos : pos + 60]))
                    )
                try:
                    name = buf[pos:colon].decode("utf-8")
                    value = buf[colon + 1 : end].decode("utf-8")
                except UnicodeDecodeError:
                    raise FrameError(
                        FrameErrorReason.INVALID_UTF8, f"in header line {len(headers) + 1}"
                    ) from None
                if self._escape:
                    if "\\" in name:
                        name = unescape_header(name, self._v12)
                    if "\\" in value:
                        value = unescape_header(value, self._v12)
                elif self._trim:
                    value = value.strip(" \t")
                if self._content_length < 0 and name == "content-length":
                    self._content_length = parse_content_length(value, limits.max_frame_bytes)
                headers.append((name, value))

        # _BODY
        pos = self._pos
        length = self._content_length
        if length >= 0:
            if size <= pos + length:
                return None
            if buf[pos + length] != 0:
                raise FrameError(
                    FrameErrorReason.MISSING_NUL,
                    f"byte 0x{buf[pos + length]:02x} after content-length {length}",
                )
            end = pos + length
        else:
            end = buf.find(b"\0", self._scan)
            if end < 0:
                if size - pos > limits.max_frame_bytes:
                    raise FrameError(
                        FrameErrorReason.BODY_TOO_LARGE,
                        f"{size - pos} bytes and no NUL yet, "
                        f"max_frame_bytes={limits.max_frame_bytes}",
                    )
                self._scan = size
                return None
            if end - pos > limits.max_frame_bytes:
                raise FrameError(
                    FrameErrorReason.BODY_TOO_LARGE,
                    f"{end - pos} bytes, max_frame_bytes={limits.max_frame_bytes}",
                )
        frame = Frame(self._command, self._headers, bytes(buf[pos:end]))
        self._pos = self._scan = end + 1
        self._consumed = 0
        self._phase = _COMMAND
        return frame


def encode_heartbeat() -> bytes:
    """One heart-beat: a bare EOL."""
    return b"\n"


def _escape(text: str, v12: bool) -> str:
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if "\n" in text:
        text = text.replace("\n", "\\n")
    if ":" in text:
        text = text.replace(":", "\\c")
    if v12 and "\r" in text:
        text = text.replace("\r", "\\r")
    return text


def encode_frame(frame: Frame, version: str = "1.2", content_length: bool = True) -> bytes:
    """Serialise ``frame`` for a session speaking ``version``.

    Headers are escaped in 1.1/1.2 except on CONNECT/STOMP/CONNECTED frames. A header the
    version cannot carry (EOL in an unescaped header, colon in an unescaped name, value
    ending in CR where CR is not escaped, empty name) is a :class:`FrameError`.
    ``content_length=True`` adds ``content-length`` when absent and the body is non-empty;
    it is added regardless when the body contains a NUL (the frame would be cut short
    otherwise). An existing ``content-length`` must match the body.
    """
    command = frame.command
    _check_version(version)
    if command not in CLIENT_COMMANDS and command not in SERVER_COMMANDS:
        raise FrameError(FrameErrorReason.UNKNOWN_COMMAND, repr(command))
    body = frame.body
    escape = version != "1.0" and command not in UNESCAPED_COMMANDS
    v12 = version == "1.2"
    parts = [command, "\n"]
    declared: str | None = None
    for name, value in frame.headers:
        if not name:
            raise FrameError(FrameErrorReason.EMPTY_HEADER_NAME, f"value {value!r}")
        if value is None:
            raise TypeError(f"header {name!r} has the value None; header values are str")
        if declared is None and name == "content-length":
            declared = value
        if escape:
            name = _escape(name, v12)
            value = _escape(value, v12)
        elif "\n" in name or ":" in name:
            raise FrameError(
                FrameErrorReason.UNENCODABLE_HEADER,
                f"name {name!r} has LF or colon and cannot be escaped here",
            )
        elif "\n" in value:
            raise FrameError(
                FrameErrorReason.UNENCODABLE_HEADER,
                f"value of {name!r} has LF and cannot be escaped here",
            )
        if value.endswith("\r"):
            raise FrameError(
                FrameErrorReason.UNENCODABLE_HEADER,
                f"value of {name!r} ends in CR, which would read as part of the EOL",
            )
        parts += (name, ":", value, "\n")
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
        parts += ("content-length:", str(len(body)), "\n")
    parts.append("\n")
    try:
        head = "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FrameError(FrameErrorReason.INVALID_UTF8, str(exc)) from None
    return head + body + b"\0"
