"""The wire format between host and daemon, shared by both sides.

A frame is::

    u32 total_length  (big-endian; length of everything after this field)
    u32 header_length (big-endian)
    header            (UTF-8 JSON object, header_length bytes)
    blob              (raw bytes, total_length - 4 - header_length bytes)

Binary payloads (file contents, process output) travel in the blob, so they are
never base64-inflated. Header shapes:

    request  {"id": int, "op": str, "args": {...}}
    reply    {"id": int, "ok": true,  "result": {...}}
             {"id": int, "ok": false, "error": {"code": str, "message": str}}
    event    {"id": int, "event": str, "data": {...}}   (streamed, before the reply)

Standard library only, Python >= 3.8: the host imports this module too.
"""

import json
import struct
from typing import Any, Dict, List, Optional, Tuple

PROTOCOL_VERSION = 1

# Where a daemon started with CAISSON_LISTEN=1 also takes connections from the host.
SOCKET_PATH = "/run/caisson/daemon.sock"

_LEN = struct.Struct(">I")
PREFIX_SIZE = 4

# Defaults; each side may configure tighter limits.
DEFAULT_MAX_FRAME = 64 * 1024 * 1024
# A walk of a large tree (~20,000+ entries at ~75 bytes each) is a header of several MiB.
DEFAULT_MAX_HEADER = 16 * 1024 * 1024


class ProtocolError(Exception):
    """The peer sent something that is not a valid frame."""


Frame = Tuple[Dict[str, Any], bytes]


def encode_frame(header: Dict[str, Any], blob: bytes = b"") -> bytes:
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return b"".join((_LEN.pack(4 + len(head) + len(blob)), _LEN.pack(len(head)), head, blob))


def decode_body(body: bytes, max_header: int = DEFAULT_MAX_HEADER) -> Frame:
    """Split a frame body (everything after the total length) into header and blob."""
    if len(body) < PREFIX_SIZE:
        raise ProtocolError("frame of %d bytes is shorter than its header length field" % len(body))
    (head_len,) = _LEN.unpack_from(body, 0)
    if head_len > len(body) - PREFIX_SIZE:
        raise ProtocolError("header length %d exceeds frame length %d" % (head_len, len(body)))
    if head_len > max_header:
        raise ProtocolError("header of %d bytes exceeds the limit of %d" % (head_len, max_header))
    raw = body[PREFIX_SIZE : PREFIX_SIZE + head_len]
    try:
        header = json.loads(raw.decode("utf-8"))
    except RecursionError:
        # The C decoder guards its own recursion: deep nesting costs neither a crash nor a scan.
        raise ProtocolError("header JSON is nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError("header is not valid UTF-8 JSON: %s" % exc) from None
    if not isinstance(header, dict):
        raise ProtocolError("header is a JSON %s, not an object" % type(header).__name__)
    return header, bytes(body[PREFIX_SIZE + head_len :])


class FrameDecoder:
    """Incremental decoder: feed bytes as they arrive, take whole frames out.

    The total length is checked against ``max_frame`` as soon as its four bytes
    arrive, so an oversized frame is refused before any of it is buffered.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME, max_header: int = DEFAULT_MAX_HEADER) -> None:
        self.max_frame = max_frame
        self.max_header = max_header
        self._buf = bytearray()
        self._need: Optional[int] = None

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> List[Frame]:
        self._buf += data
        frames: List[Frame] = []
        while True:
            if self._need is None:
                if len(self._buf) < PREFIX_SIZE:
                    break
                (need,) = _LEN.unpack_from(self._buf, 0)
                if need > self.max_frame:
                    raise ProtocolError("frame of %d bytes exceeds the limit of %d" % (need, self.max_frame))
                self._need = need
                del self._buf[:PREFIX_SIZE]
            if len(self._buf) < self._need:
                break
            body = bytes(self._buf[: self._need])
            del self._buf[: self._need]
            self._need = None
            frames.append(decode_body(body, self.max_header))
        return frames
