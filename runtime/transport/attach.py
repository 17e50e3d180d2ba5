"""The Docker attach stream of a container, as an async byte stream.

docker-py's attach socket is blocking; the hot path of every tool call runs over this
stream, so it is opened here directly with anyio: an HTTP upgrade on the engine's
socket, then Docker's multiplexed stdout/stderr framing (8-byte headers) is split.
"""

from __future__ import annotations

import os
import socket
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import anyio
import anyio.abc
import anyio.lowlevel

from caisson._sandbox.protocol import FrameDecoder, encode_frame
from caisson.errors import DaemonDied, DaemonProtocolError, DockerUnavailable
from caisson.logs import get_logger
from caisson.transport.rawsock import SocketReader

log = get_logger("caisson.attach")

_MUX = struct.Struct(">BxxxI")
STDOUT = 1  # Docker's stream type; 2 (stderr) is the only other one the daemon writes
_MAX_HTTP_HEADER = 16 * 1024
STDERR_TAIL = 8 * 1024


class AttachStream:
    """Write to the container's stdin; read its stdout. Its stderr is kept as a short tail."""

    def __init__(self, stream: anyio.abc.SocketStream, initial: bytes) -> None:
        self._stream = stream
        self._reader = SocketReader(stream.extra(anyio.abc.SocketAttribute.raw_socket))
        self._raw = bytearray(initial)
        self._send_lock = anyio.Lock()
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0

    @property
    def stderr_tail(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    def _keep_stderr(self, chunk: bytes) -> None:
        self._stderr.append(chunk)
        self._stderr_size += len(chunk)
        while self._stderr_size > STDERR_TAIL and len(self._stderr) > 1:
            self._stderr_size -= len(self._stderr.popleft())
        log.debug("daemon stderr", text=chunk.decode("utf-8", "replace").rstrip())

    async def _fill(self, n: int) -> bool:
        while len(self._raw) < n:
            chunk = await self._reader.recv()
            if not chunk:
                return False
            self._raw += chunk
            if len(self._raw) < n:
                await anyio.lowlevel.checkpoint()  # a long frame (or a flood) lets other tasks run
        return True

    async def receive(self) -> bytes:
        """Next chunk of the container's stdout; b"" when the stream has ended."""
        while True:
            if not await self._fill(_MUX.size):
                return b""
            kind, size = _MUX.unpack_from(self._raw, 0)
            if not await self._fill(_MUX.size + size):
                return b""
            chunk = bytes(self._raw[_MUX.size : _MUX.size + size])
            del self._raw[: _MUX.size + size]
            if kind == STDOUT:
                return chunk
            self._keep_stderr(chunk)
            await anyio.lowlevel.checkpoint()

    async def send(self, data: bytes) -> None:
        async with self._send_lock:
            await self._stream.send(data)

    async def aclose(self) -> None:
        self._reader.closing()
        await self._stream.aclose()

    async def detach(self) -> Detached:
        """The connection, out of this event loop, for ``resume`` in another; the bytes read
        but not yet taken go with it."""
        raw = self._stream.extra(anyio.abc.SocketAttribute.raw_socket)
        sock = socket.socket(fileno=os.dup(raw.fileno()))
        await self.aclose()
        return Detached(sock, bytes(self._raw))


@dataclass(frozen=True)
class Detached:
    """An attach stream opened in one event loop (a warm pool's thread), to go on in another."""

    sock: socket.socket
    initial: bytes

    def close(self) -> None:
        self.sock.close()


async def resume(detached: Detached) -> AttachStream:
    kind = anyio.abc.UNIXSocketStream if detached.sock.family == socket.AF_UNIX else anyio.abc.SocketStream
    return AttachStream(await kind.from_socket(detached.sock), detached.initial)


# The id of the request ``attach_and_ask`` sends: none a session's channel uses (they count from 1).
ASK_ID = 2**31


def attach_and_ask(docker_host: str, api_version: str, container_id: str, op: str, *, timeout: float) -> Detached:
    """From a thread without an event loop (a warm pool's): attach to a started container, ask
    its daemon ``op`` (no arguments), and wait for the answer; the stream then goes on, for a
    session to take up (``resume``). Raises if the daemon does not answer within ``timeout``."""

    async def ask() -> Detached:
        stream = await open_attach(docker_host, api_version, container_id, timeout=timeout)
        try:
            with anyio.fail_after(timeout):
                await stream.send(encode_frame({"id": ASK_ID, "op": op, "args": {}}))
                decoder = FrameDecoder()
                frames: list[Any] = []
                while not frames:
                    chunk = await stream.receive()
                    if not chunk:
                        raise DaemonDied(f"the daemon of container {container_id[:12]} ended: {stream.stderr_tail}")
                    frames = decoder.feed(chunk)
            header = frames[0][0]
            if len(frames) > 1 or decoder.buffered or header.get("id") != ASK_ID or not header.get("ok"):
                raise DaemonProtocolError(f"the daemon of container {container_id[:12]} answered {op} with {str(header)[:200]}")
        except BaseException:
            with anyio.CancelScope(shield=True):
                await stream.aclose()
            raise
        return await stream.detach()

    try:
        return anyio.run(ask)
    except TimeoutError:
        raise DaemonDied(f"the daemon of container {container_id[:12]} did not answer {op} within {timeout:g} s") from None


async def _connect(docker_host: str) -> anyio.abc.SocketStream:
    url = urlparse(docker_host)
    try:
        if url.scheme in ("unix", "http+unix", ""):
            return await anyio.connect_unix(url.path or docker_host)
        if url.scheme in ("tcp", "http"):
            return await anyio.connect_tcp(url.hostname or "localhost", url.port or 2375)
    except OSError as exc:
        raise DockerUnavailable(f"Docker is not reachable at {docker_host}: {exc}") from None
    raise DockerUnavailable(
        f"DOCKER_HOST {docker_host!r} is not supported for attach: use a unix:// socket or tcp:// address"
    )


async def open_attach(docker_host: str, api_version: str, container_id: str, *, timeout: float) -> AttachStream:
    """Attach to a container's stdin/stdout; an engine that does not answer within
    ``timeout`` seconds is an error, never a hang."""
    try:
        with anyio.fail_after(timeout):
            return await _open(docker_host, api_version, container_id)
    except TimeoutError:
        raise DockerUnavailable(
            f"Docker at {docker_host} did not answer an attach request within {timeout:g} s"
        ) from None


async def _open(docker_host: str, api_version: str, container_id: str) -> AttachStream:
    stream = await _connect(docker_host)
    try:
        request = (
            f"POST /v{api_version}/containers/{container_id}/attach?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\n"
            "Host: docker\r\nUpgrade: tcp\r\nConnection: Upgrade\r\nContent-Length: 0\r\n\r\n"
        ).encode()
        await stream.send(request)
        head = bytearray()
        while b"\r\n\r\n" not in head:
            if len(head) > _MAX_HTTP_HEADER:
                raise DockerUnavailable("Docker answered the attach request with an oversized header")
            try:
                head += await stream.receive(4096)
            except anyio.EndOfStream:
                raise DockerUnavailable("Docker closed the attach connection before answering") from None
        header, _, rest = bytes(head).partition(b"\r\n\r\n")
        status = header.split(b"\r\n", 1)[0].decode("latin-1")
        if " 101 " not in status and " 200 " not in status:
            raise DockerUnavailable(f"Docker refused to attach to container {container_id[:12]}: {status}")
        return AttachStream(stream, rest)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
        raise
