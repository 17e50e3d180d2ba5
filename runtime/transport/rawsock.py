"""Reading a connected socket in the event loop, one chunk at a time.

anyio's ``receive`` waits on the socket object, and asyncio's selector formats the object's
repr into a KeyError (two getsockname-like calls) each time it registers it; waiting on the
descriptor number costs nothing, and this is every tool call's path.
"""

from __future__ import annotations

import socket

import anyio

READ_SIZE = 65536


class SocketReader:
    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.fd = sock.fileno()

    async def recv(self) -> bytes:
        """The next chunk; b"" once the stream has ended, been closed or broken."""
        while True:
            try:
                return self.sock.recv(READ_SIZE)
            except BlockingIOError:
                try:
                    await anyio.wait_readable(self.fd)
                except (anyio.ClosedResourceError, OSError):
                    return b""
            except OSError:
                return b""

    def closing(self) -> None:
        """Wake a task waiting in ``recv`` before the socket is closed."""
        anyio.notify_closing(self.fd)
