"""What the STOMP server says when it refuses a client: :class:`ProtocolError` for a
mistake that ends the session, and the ERROR text for a frame the parser refused (a limit
names itself, its value and its config key; an unknown command names the command)."""

from __future__ import annotations

from jmspy.stomp_frames import CLIENT_COMMANDS, CodecLimits, FrameError, FrameErrorReason

__all__ = ["CLOSED", "ProtocolError", "frame_problem"]


class ProtocolError(Exception):
    """A client mistake that ends the session: ERROR frame, then close."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


#: Codec limits a client can hit, as (the [limits] key, the CodecLimits field, what grew).
LIMITS: dict[FrameErrorReason, tuple[str, str, str]] = {
    FrameErrorReason.BODY_TOO_LARGE: ("max-frame-bytes", "max_frame_bytes", "body"),
    FrameErrorReason.TOO_MANY_HEADERS: ("max-headers", "max_headers", "header count"),
    FrameErrorReason.HEADERS_TOO_LARGE: ("max-header-bytes", "max_header_bytes",
                                         "header section"),
}
CLOSED = ("The connection is closed: the rest of the stream cannot be re-framed after a "
           "refused frame.")


def frame_problem(exc: FrameError, limits: CodecLimits) -> tuple[str, str]:
    """The ERROR ``message`` header and body for a frame the parser refused: a limit names
    itself, its value and its config key; an unknown command names the command."""
    limit = LIMITS.get(exc.reason)
    if limit is not None:
        key, field, what = limit
        value = getattr(limits, field)
        return (f"frame {what} over the limit: [limits] {key} = {value}",
                f"{exc}. This broker's [limits] {key} is {value}; send less, or raise "
                f"{key} in the [limits] table of the broker's config file. {CLOSED}")
    if exc.reason in (FrameErrorReason.UNKNOWN_COMMAND, FrameErrorReason.COMMAND_TOO_LONG):
        named = exc.detail if exc.reason is FrameErrorReason.UNKNOWN_COMMAND else (
            f"of {exc.detail}")
        return (f"unknown command {named}",
                f"{exc.reason.value} {named}: a STOMP client sends one of "
                f"{', '.join(sorted(CLIENT_COMMANDS))}. {CLOSED}")
    return ("malformed frame", f"{exc}. Fix the frame encoding. {CLOSED}")
