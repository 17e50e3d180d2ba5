"""The daemon's unix socket, reached through the container's root: the local fast path.

The attach stream crosses the engine and its shim on every frame; a unix socket does not
(about 0.05 ms a round trip instead of 0.4). The host finds the socket at
``/proc/<pid>/root`` + ``SOCKET_PATH``, walking each component with ``O_NOFOLLOW`` on the
container's root file system, so nothing in the container can point the host at a socket of
its own (the engine's, say); it connects through the descriptor it checked.

Only where the host may reach the container's root (``container_root.reachable_pid``).
"""

from __future__ import annotations

import errno
import os
import socket
import stat

import anyio
import anyio.lowlevel

from caisson._sandbox.protocol import SOCKET_PATH
from caisson.errors import DaemonProtocolError
from caisson.transport import container_root
from caisson.transport.attach import AttachStream
from caisson.transport.channel import ByteTransport
from caisson.transport.rawsock import READ_SIZE, SocketReader

# How often a host waiting for a starting daemon's socket looks again.
POLL_INTERVAL = 0.002
# Errors that mean "not there yet" while the daemon starts.
_NOT_YET = (errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN)


class UnixStream:
    """A ByteTransport on a connected socket: frames both ways, nothing else."""

    def __init__(self, sock: socket.socket) -> None:
        self._reader = SocketReader(sock)
        self._sock = sock
        self._send_lock = anyio.Lock()

    @property
    def stderr_tail(self) -> str:
        return ""  # the daemon's stderr is not on this stream

    async def receive(self) -> bytes:
        chunk = await self._reader.recv()
        if len(chunk) == READ_SIZE:
            await anyio.lowlevel.checkpoint()  # a long frame (or a flood) lets other tasks run
        return chunk

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        async with self._send_lock:
            while view:
                try:
                    view = view[self._sock.send(view) :]
                except BlockingIOError:
                    await anyio.wait_writable(self._reader.fd)

    async def aclose(self) -> None:
        self._reader.closing()
        self._sock.close()


def try_connect(pid: int) -> socket.socket | None:
    """A connection to the daemon's socket; None while it is not listening yet.
    DaemonProtocolError: something else is where the socket should be."""
    try:
        with container_root.opened(pid, SOCKET_PATH) as fd:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                raise DaemonProtocolError(f"{SOCKET_PATH} in the container is not a socket")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                sock.connect(f"/proc/self/fd/{fd}")
            except BaseException:
                sock.close()
                raise
            return sock
    except OSError as exc:
        if exc.errno in _NOT_YET:
            return None
        # A link, a mount or a file where the socket should be: set there by root in the container.
        raise DaemonProtocolError(f"the daemon's socket cannot be reached safely: {exc}") from None


async def connect(pid: int, *, timeout: float) -> UnixStream:
    """Wait (up to ``timeout`` seconds) for a started daemon's socket and connect."""
    with anyio.fail_after(timeout):
        while (sock := try_connect(pid)) is None:
            await anyio.sleep(POLL_INTERVAL)
    return UnixStream(sock)


async def upgrade(attach: AttachStream, pid: int, *, timeout: float) -> ByteTransport:
    """Move a new session from its attach stream to the socket once the daemon listens.

    The attach stream stays the answer when the daemon ends first (the channel then tells
    its last words from stderr) or the socket cannot be reached."""
    with anyio.move_on_after(timeout):
        while True:
            try:
                sock = try_connect(pid)
            except DaemonProtocolError:
                return attach
            if sock is not None:
                await attach.aclose()
                return UnixStream(sock)
            with anyio.move_on_after(POLL_INTERVAL):
                chunk = await attach.receive()
                if chunk:
                    raise DaemonProtocolError("the daemon wrote to its stdout before it was asked anything")
                return attach
    return attach
