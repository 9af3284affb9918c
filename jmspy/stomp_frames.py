"""STOMP frame vocabulary shared by both codec twins.

The byte scanning lives in ``jmspy._pure.stomp_codec`` and its compiled twin
``jmspy._cext.stomp_codec`` (``jmspy.twins.stomp_codec`` is the one running). Both import
this module, so a frame, an error, a limit or a heartbeat is the *same* Python object
whichever twin produced it, and the rare paths whose behaviour must match to the byte
(header unescaping, content-length validation) are written once, here.

Wire format (STOMP 1.2)::

    frame   = COMMAND EOL *(header EOL) EOL *OCTET NULL *(EOL)
    EOL     = [CR] LF

Choices the specification leaves open, made once for both twins:

* EOL is ``\\n`` or ``\\r\\n`` in every version (1.0/1.1 only name LF; we tolerate CRLF).
* A header line splits at its *first* colon; an empty header name is an error.
* 1.0 strips spaces and tabs around header *values* (as ActiveMQ and RabbitMQ do); 1.1 and
  1.2 keep values byte for byte.
* 1.1/1.2 unescape header names and values (``\\n``, ``\\c``, ``\\\\``, plus ``\\r`` in 1.2);
  CONNECT, STOMP and CONNECTED frames and every 1.0 frame are not unescaped.
* ``content-length`` (first occurrence) must be ASCII digits only.
* ``CodecLimits.max_frame_bytes`` bounds the *body*; the command line and the header section
  have their own limits, so a frame never needs more than the sum of the three.
* The allowed commands depend only on the role (``server=True`` parses client frames), not on
  the version: refusing e.g. NACK on a 1.0 session is the protocol layer's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, Final, Protocol, final, runtime_checkable

from jmspy.errors import JMSException

__all__ = [
    "ALL_COMMANDS",
    "CLIENT_COMMANDS",
    "DEFAULT_MAX_FRAME_BYTES",
    "HEARTBEAT",
    "SERVER_COMMANDS",
    "UNESCAPED_COMMANDS",
    "VERSIONS",
    "CodecLimits",
    "Frame",
    "FrameError",
    "FrameErrorReason",
    "FrameParserProtocol",
    "Heartbeat",
    "header_dict",
    "parse_content_length",
    "unescape_header",
]

VERSIONS: Final = frozenset({"1.0", "1.1", "1.2"})

CLIENT_COMMANDS: Final = frozenset(
    {
        "CONNECT",
        "STOMP",
        "SEND",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "ACK",
        "NACK",
        "BEGIN",
        "COMMIT",
        "ABORT",
        "DISCONNECT",
    }
)
SERVER_COMMANDS: Final = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})
ALL_COMMANDS: Final = CLIENT_COMMANDS | SERVER_COMMANDS

#: Frames whose headers are never escaped: the version is not negotiated yet when they
#: travel (STOMP is CONNECT's 1.1+ alias).
UNESCAPED_COMMANDS: Final = frozenset({"CONNECT", "STOMP", "CONNECTED"})


class FrameErrorReason(StrEnum):
    """Why a frame was refused; stable values that code and tests can compare."""

    UNKNOWN_COMMAND = "unknown command"
    COMMAND_TOO_LONG = "command too long"
    HEADER_WITHOUT_COLON = "header without colon"
    EMPTY_HEADER_NAME = "empty header name"
    HEADERS_TOO_LARGE = "header section too large"
    TOO_MANY_HEADERS = "too many headers"
    INVALID_UTF8 = "invalid utf-8"
    UNDEFINED_ESCAPE = "undefined escape sequence"
    INVALID_CONTENT_LENGTH = "invalid content-length"
    BODY_TOO_LARGE = "body too large"
    MISSING_NUL = "missing NUL after body"
    UNENCODABLE_HEADER = "unencodable header"


class FrameError(JMSException):
    """Malformed (or unencodable) STOMP data.

    ``reason`` is a :class:`FrameErrorReason`; the message adds what exactly was wrong. A
    parser that raised it is unusable (the stream has lost its framing): close the
    connection, after sending an ERROR frame if you are the server.
    """

    error_code = "STOMP_FRAME"

    def __init__(self, reason: FrameErrorReason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason: FrameErrorReason = reason
        self.detail: str = detail


@final
class Heartbeat:
    """Type of :data:`HEARTBEAT`, which a parser returns for each bare EOL between frames."""

    __slots__ = ()
    _instance: ClassVar[Heartbeat | None] = None

    def __new__(cls) -> Heartbeat:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "HEARTBEAT"

    def __reduce__(self) -> str:
        return "HEARTBEAT"


HEARTBEAT: Final = Heartbeat()


@dataclass(slots=True)
class Frame:
    """One STOMP frame.

    ``headers`` keeps wire order and repeats (a header may legally appear more than once);
    use :meth:`header` for the value that counts. Names and values are unescaped text.
    """

    command: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The value of the FIRST ``name`` header (STOMP 1.2: later repeats are ignored)."""
        for key, value in self.headers:
            if key == name:
                return value
        return None


def header_dict(headers: list[tuple[str, str]]) -> dict[str, str]:
    """A frame's headers as a dict, in wire order, where a repeated name keeps its FIRST
    value (STOMP 1.2, as :meth:`Frame.header` reads it; stomp.py's parser does the same).
    ``dict()`` keeps the last value, so only a frame that repeats a name (rare) is rebuilt
    pair by pair."""
    result = dict(headers)
    if len(result) != len(headers):
        result = {}
        for name, value in headers:
            result.setdefault(name, value)
    return result


#: The largest frame body a parser accepts unless configured otherwise: ActiveMQ 5's
#: ``maxFrameSize`` default (100 MiB), so a client reads what other brokers send. The
#: bundled broker's own default is lower (``broker_ref.core.input_budget``): there every
#: connection may be reading a frame at once.
DEFAULT_MAX_FRAME_BYTES: Final = 100 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CodecLimits:
    """Bounds that keep a hostile peer from making a parser buffer without end.

    Each is checked while bytes are still arriving: a command line, header section or
    body that has already grown past its limit fails at once, without waiting for the
    EOL or NUL that would end it.
    """

    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES  #: largest body
    max_headers: int = 1000  #: most header lines in one frame
    max_header_bytes: int = 64 * 1024  #: largest header section, EOLs and blank line included
    max_command_bytes: int = 64  #: longest command (EOL excluded)

    def __post_init__(self) -> None:
        for name in ("max_frame_bytes", "max_headers", "max_header_bytes", "max_command_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"CodecLimits.{name} must be an int >= 0, got {value!r}")


@runtime_checkable
class FrameParserProtocol(Protocol):
    """What both parser twins provide (sans-I/O, h11 style).

    ``feed`` only buffers; ``next_frame`` does the work and returns a :class:`Frame`,
    :data:`HEARTBEAT`, or ``None`` when it needs more bytes. After it raised
    :class:`FrameError` every further call raises it again.
    """

    @property
    def version(self) -> str: ...

    @property
    def buffered(self) -> int: ...

    def set_version(self, version: str) -> None: ...

    def feed(self, data: bytes) -> None: ...

    def next_frame(self) -> Frame | Heartbeat | None: ...


_UNESCAPES_11: Final = {"n": "\n", "c": ":", "\\": "\\"}
_UNESCAPES_12: Final = {"n": "\n", "c": ":", "\\": "\\", "r": "\r"}


def unescape_header(text: str, v12: bool) -> str:
    """Undo STOMP 1.1/1.2 header escaping; an undefined escape is a :class:`FrameError`.

    Callers only come here when ``text`` contains a backslash (the rare path).
    """
    table = _UNESCAPES_12 if v12 else _UNESCAPES_11
    parts: list[str] = []
    start = 0
    while True:
        i = text.find("\\", start)
        if i < 0:
            parts.append(text[start:])
            return "".join(parts)
        parts.append(text[start:i])
        if i + 1 == len(text):
            raise FrameError(FrameErrorReason.UNDEFINED_ESCAPE, f"backslash at end of {text!r}")
        replacement = table.get(text[i + 1])
        if replacement is None:
            raise FrameError(FrameErrorReason.UNDEFINED_ESCAPE, f"\\{text[i + 1]} in {text!r}")
        parts.append(replacement)
        start = i + 2


_DIGITS: Final = frozenset("0123456789")


def parse_content_length(value: str, max_body: int) -> int:
    """Validate a received ``content-length``: ASCII digits only, at most ``max_body``."""
    if not value or not _DIGITS.issuperset(value):
        raise FrameError(FrameErrorReason.INVALID_CONTENT_LENGTH, repr(value))
    # Long digit strings would trip int()'s 4300-digit guard; they are too large anyway.
    length = int(value) if len(value) <= 18 else max_body + 1
    if length > max_body:
        raise FrameError(
            FrameErrorReason.BODY_TOO_LARGE,
            f"content-length {value[:20]} exceeds max_frame_bytes={max_body}",
        )
    return length
