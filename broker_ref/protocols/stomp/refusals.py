"""What the STOMP server says when it refuses a client: :class:`ProtocolError` for a
mistake that ends the session, and the ERROR text for a frame the parser refused (a limit
names itself, its value and its config key; an unknown command names the command)."""

from __future__ import annotations

import re

from jmspy.errors import JMSException
from jmspy.stomp_frames import CLIENT_COMMANDS, CodecLimits, FrameError, FrameErrorReason

__all__ = ["CLOSED", "ProtocolError", "check_echoable", "frame_problem"]


class ProtocolError(JMSException):
    """A client mistake that ends the session: ERROR frame, then close."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail



def check_echoable(version: str, name: str, value: str) -> None:
    """Refuse, before acting, a value the server must echo in a header (a receipt, a
    subscription id) that the negotiated ``version`` cannot encode: 1.0 escapes nothing
    and 1.1 cannot escape a CR, so such a value would break the reply's framing."""
    if version == "1.2" or ("\r" not in value and "\n" not in value):
        return
    raise ProtocolError(
        f"unencodable {name} header",
        f"the {name} header's value contains a CR or LF, which STOMP {version} "
        f"cannot carry back in a header; use a {name} without line breaks (or STOMP 1.2, "
        "which escapes them)")

#: Codec limits a client can hit, as (the [limits] key, the CodecLimits field, what grew,
#: its unit).
LIMITS: dict[FrameErrorReason, tuple[str, str, str, str]] = {
    FrameErrorReason.BODY_TOO_LARGE: ("max-frame-bytes", "max_frame_bytes", "body", "bytes"),
    FrameErrorReason.TOO_MANY_HEADERS: ("max-headers", "max_headers", "header count",
                                        "headers"),
    FrameErrorReason.HEADERS_TOO_LARGE: ("max-header-bytes", "max_header_bytes",
                                         "header section", "bytes"),
}
#: The size in a body's detail: "content-length N exceeds ...", "N bytes, ...", or
#: "N bytes and no NUL yet" (a body still streaming: its size so far).
_SIZE = re.compile(r"(\d+)( bytes and no NUL yet)?")
CLOSED = ("The connection is closed: the rest of the stream cannot be re-framed after a "
           "refused frame.")


def frame_problem(exc: FrameError, limits: CodecLimits) -> tuple[str, str]:
    """The ERROR ``message`` header and body for a frame the parser refused: a limit names
    itself, its value and its config key; an unknown command names the command."""
    limit = LIMITS.get(exc.reason)
    if limit is not None:
        key, field, what, unit = limit
        value = getattr(limits, field)
        # Each number and the key said once: the client shows this text as the error of
        # the call that sent the frame, and a reader should not have to find it twice.
        found = (_SIZE.search(exc.detail) if exc.reason is FrameErrorReason.BODY_TOO_LARGE
                 else None)  # the header limits' details only repeat the limit
        size = ("" if found is None else
                f"{'at least ' if found.group(2) else ''}{found.group(1)} {unit}, ")
        message = (f"frame {what} too large: {size}over this broker's limit of "
                   f"{value} {unit} ([limits] {key})")
        return (message, f"{message}. Send less, or raise that limit in the broker's "
                         f"config file. {CLOSED}")
    if exc.reason in (FrameErrorReason.UNKNOWN_COMMAND, FrameErrorReason.COMMAND_TOO_LONG):
        named = exc.detail if exc.reason is FrameErrorReason.UNKNOWN_COMMAND else (
            f"of {exc.detail}")
        return (f"unknown command {named}",
                f"{exc.reason.value} {named}: a STOMP client sends one of "
                f"{', '.join(sorted(CLIENT_COMMANDS))}. {CLOSED}")
    return ("malformed frame", f"{exc}. Fix the frame encoding. {CLOSED}")
