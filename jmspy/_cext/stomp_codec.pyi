"""Types of the compiled STOMP frame codec (cython_ext/stomp_codec.pyx).

Same API as the pure twin ``jmspy._pure.stomp_codec``; both satisfy
``jmspy.stomp_frames.FrameParserProtocol``.
"""

from typing import Final

from jmspy.stomp_frames import CodecLimits, Frame, Heartbeat

__all__ = ["HEARTBEAT", "FrameParser", "encode_frame", "encode_heartbeat"]

HEARTBEAT: Final[Heartbeat]

class FrameParser:
    def __init__(
        self, version: str = "1.2", limits: CodecLimits | None = None, server: bool = True
    ) -> None: ...
    @property
    def version(self) -> str: ...
    @property
    def buffered(self) -> int: ...
    def set_version(self, version: str) -> None: ...
    def feed(self, data: bytes) -> None: ...
    def next_frame(self) -> Frame | Heartbeat | None: ...

def encode_heartbeat() -> bytes: ...
def encode_frame(frame: Frame, version: str = "1.2", content_length: bool = True) -> bytes: ...
