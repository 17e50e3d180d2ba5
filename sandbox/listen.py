"""The daemon's unix socket: the local host's fast way in, beside the attach stream.

The attach stream crosses the engine and its shim on every frame (about 0.4 ms a round
trip); a unix socket in the container's own file system, reached by the host through
``/proc/<pid>/root``, costs about 0.05 ms. Nothing in the container may use it:

- it lives in a directory only root may enter, and the daemon is the only root process;
- a connection is served only when its peer is outside the container's pid namespace
  (the kernel reports such a peer's pid as 0), so even root inside is refused.

One controller at a time: a new connection takes over from the old one (a restarted
controller reattaching), whose replies are dropped. Background work goes on either way.
"""

import contextlib
import logging
import os
import socket
import struct
import threading
from typing import Callable, Optional

from .protocol import SOCKET_PATH

log = logging.getLogger("caisson.listen")

_UCRED = struct.Struct("3i")


def from_outside(conn: socket.socket) -> bool:
    """Whether the peer lives outside this pid namespace, i.e. is the host."""
    pid, _, _ = _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return pid == 0


def bind(path: str = SOCKET_PATH) -> socket.socket:
    directory = os.path.dirname(path)
    os.makedirs(directory, 0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(8)
    return listener


def accept_forever(listener: socket.socket, serve: Callable[[int], None]) -> None:
    """Serve each host connection on its own thread; a newer one ends the one before."""
    current: Optional[socket.socket] = None
    while True:
        try:
            conn, _ = listener.accept()
        except OSError as exc:
            log.error("cannot accept connections: %s", exc)
            return
        if not from_outside(conn):
            log.warning("refused a connection from inside the container")
            conn.close()
            continue
        if current is not None:
            with contextlib.suppress(OSError):
                current.shutdown(socket.SHUT_RDWR)  # its reader sees the end and lets go
        current = conn
        threading.Thread(target=_serve_one, args=(conn, serve), name="caisson-conn", daemon=True).start()


def _serve_one(conn: socket.socket, serve: Callable[[int], None]) -> None:
    try:
        serve(conn.fileno())
    finally:
        conn.close()
